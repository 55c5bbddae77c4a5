#!/usr/bin/env python3
"""CPU tests of the comparison (scripts/compare.sh and scripts/compare.py), with fakes for the GPUs.

usage: test_compare.py PATH/TO/scripts WORK_DIR

The table (compare.py, on fake RESULT files): speedup and efficiency are taken against 01's run,
failed, timed-out and unbuilt runs are shown as such (and make compare.py exit 1), runs of another
iteration count or grid than 01's are named under the table, and the CSV, JSON and Markdown files hold
the same rows; the chart shows a failed run's status, not a bar.
The runner (compare.sh, on a copy of the scripts whose build step does nothing, with fake visible_gpus,
nvidia-smi, mpirun and programs that print a RESULT): bad flags exit 2, no GPU exits 3 with one line,
and with 2 fake GPUs every pattern runs on 1 and 2 GPUs with the right launcher and flags, the scaling
model's inputs are measured (01 with 4 shots, the allreduce sweeps from G/8 to 2G) and every row gets
its prediction: exact where the fake runs follow the model, a note where one does not.
"""
import csv
import json
import os
import shutil
import stat
import subprocess
import sys


def fail(message):
    print("FAILED: " + message)
    sys.exit(1)


ENV = {"hostname": "fake", "utc_time": "2025-06-01T08:30:00Z", "git_commit": "unknown", "build_type": "Release",
       "cuda_architectures": "90", "gpu_count": 0, "gpus": [], "driver_version": None,
       "nvidia_driver_version": None, "cuda_runtime_version": "13.0", "links": [], "nccl_version": None,
       "mpi_library_version": None, "nccl_env": {}}


def result(pattern, variant, gpus, gradient_s, verified=True, speedup=None, grad_rel_diff=None):
    """A RESULT of kind fwi (docs/RESULT.md) with these figures."""
    spread = {"min": 0.0005, "median": 0.0005, "max": 0.0005}
    reference = None if speedup is None else {"time_per_gradient_s": speedup * gradient_s, "speedup": speedup,
                                              "efficiency": speedup / gpus}
    return {"schema_version": 2, "kind": "fwi", "pattern": pattern, "variant": variant, "gpus": gpus, "ranks": gpus,
            "problem": "default", "grid": [384, 512], "shots": 8, "nt": 2000, "iterations": 3, "first_iteration": 1,
            "time_per_gradient_s": gradient_s, "time_per_iteration_s": gradient_s + 0.001,
            "phases_s": {"compute": spread, "wait": spread, "combine": spread, "update": spread},
            "combine_share": 0.0005 / (gradient_s + 0.001), "gradient_bytes": 786432, "reference": reference,
            "verification": {"grad_rel_diff": grad_rel_diff, "misfit_rel_diff": None, "model_rel_diff": None,
                             "models_identical": True, "misfit_first": 10.0, "misfit_final": 9.0,
                             "tolerances": {"gradient": 1e-05, "misfit": 1e-06, "model": 1e-06}},
            "details": {}, "verified": verified, "env": ENV}


def make_runs(directory, runs):
    """runs: (pattern, variant, gpus, status, RESULT object or None), rows of the table (role fwi)."""
    runs_dir = os.path.join(directory, "runs")
    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(runs_dir)
    with open(os.path.join(runs_dir, "manifest.tsv"), "w") as manifest:
        manifest.write("role\tpattern\tvariant\tgpus\tstatus\tjson\tlog\n")
        for pattern, variant, gpus, status, values in runs:
            name = "%s-%s-%d" % (pattern, variant or "none", gpus)
            if values is not None:
                with open(os.path.join(runs_dir, name + ".json"), "w") as f:
                    json.dump(values, f)
            manifest.write("fwi\t%s\t%s\t%d\t%s\t%s\t%s\n" % (pattern, variant, gpus, status, name + ".json",
                                                                 name + ".log"))


def run_compare(script, directory):
    process = subprocess.run([sys.executable, script, directory], capture_output=True, text=True, timeout=120)
    print(process.stdout + process.stderr)
    return process.returncode, process.stdout


def check_all_ok(script, work_dir):
    directory = os.path.join(work_dir, "all_ok")
    make_runs(directory, [
        ("01_single_gpu", "", 1, "0", result("01_single_gpu", "", 1, 0.080)),
        ("06_fwi_shot_parallel", "", 1, "0", result("06_fwi_shot_parallel", "", 1, 0.080, speedup=1.0,
                                                     grad_rel_diff=0.0)),
        ("06_fwi_shot_parallel", "", 2, "0", result("06_fwi_shot_parallel", "", 2, 0.040, speedup=1.98,
                                                     grad_rel_diff=2.5e-7)),
        ("06_fwi_shot_parallel", "", 4, "0", result("06_fwi_shot_parallel", "", 4, 0.025, grad_rel_diff=3e-7)),
    ])
    code, output = run_compare(script, directory)
    if code != 0:
        fail("compare.py exited %d on all-good runs" % code)
    with open(os.path.join(directory, "comparison.csv")) as f:
        rows = list(csv.DictReader(f))
    if len(rows) != 4:
        fail("expected 4 CSV rows, got %d" % len(rows))
    four = rows[3]
    if abs(float(four["speedup"]) - 3.2) > 1e-9 or abs(float(four["efficiency"]) - 0.8) > 1e-9:
        fail("4 GPUs: speedup %s, efficiency %s; expected 3.2 and 0.8" % (four["speedup"], four["efficiency"]))
    if abs(float(rows[2]["speedup_in_run"]) - 1.98) > 1e-9:
        fail("the program's own speedup is not kept as speedup_in_run")
    if "3.20" not in output or "3.0e-07" not in output:
        fail("the printed table lacks the 4-GPU speedup or grad rel diff")
    if "06_fwi_shot_parallel 2 GPU(s): not predicted: no verified 01_single_gpu run of 4 shots" not in output:
        fail("a row without the model's inputs must say which input is missing")
    with open(os.path.join(directory, "comparison.json")) as f:
        if len(json.load(f)["rows"]) != 4:
            fail("comparison.json does not hold the 4 rows")
    with open(os.path.join(directory, "comparison.md")) as f:
        if len([line for line in f if line.startswith("| 06_fwi_shot_parallel")]) != 3:
            fail("comparison.md does not hold the 3 rows of 06")
    if "unlike 01's" in output:
        fail("runs of one problem and iteration count were called unlike 01's")


def check_unlike_runs_named(script, work_dir):
    """A run of another iteration count or grid than 01's (a folder put together by hand) is named under the
    table: its speedup divides unlike things."""
    directory = os.path.join(work_dir, "unlike")
    longer = dict(result("06_fwi_shot_parallel", "", 2, 0.040), iterations=20)
    other_grid = dict(result("05_nccl_mpi", "", 2, 0.040), grid=[256, 512])
    make_runs(directory, [
        ("01_single_gpu", "", 1, "0", result("01_single_gpu", "", 1, 0.080)),
        ("06_fwi_shot_parallel", "", 2, "0", longer),
        ("05_nccl_mpi", "", 2, "0", other_grid),
    ])
    _, output = run_compare(script, directory)
    for text in ("runs unlike 01's, so their speedups and the model's figures compare unlike things",
                 "fwi 06_fwi_shot_parallel - 2 GPU(s) (06_fwi_shot_parallel-none-2.log): iterations 20 against 3",
                 "fwi 05_nccl_mpi - 2 GPU(s) (05_nccl_mpi-none-2.log): grid [256, 512] against [384, 512]"):
        if text not in output:
            fail("the note of runs unlike 01's lacks '%s'" % text)


def check_failures_shown(script, work_dir):
    directory = os.path.join(work_dir, "failures")
    make_runs(directory, [
        ("01_single_gpu", "", 1, "0", result("01_single_gpu", "", 1, 0.080)),
        ("03_host_staged_mpi", "pinned", 2, "1", result("03_host_staged_mpi", "pinned", 2, 0.045, verified=False)),
        ("04_nccl_threads", "group", 2, "not-built", None),
        ("05_nccl_mpi", "", 2, "timeout", None),
        ("06_fwi_shot_parallel", "", 2, "3", None),
        ("06_fwi_shot_parallel", "", 4, "0", dict(result("06_fwi_shot_parallel", "", 4, 0.025), speedup=3.2)),
    ])
    code, output = run_compare(script, directory)
    if code != 1:
        fail("compare.py exited %d with failed runs, expected 1" % code)
    for text in ("FAILED (exit 1: verification failed)", "not built", "TIMEOUT", "FAILED (exit 3: environment)",
                 "invalid RESULT: speedup: not in the schema", "5 of 6 runs did not finish verified"):
        if text not in output:
            fail("the output lacks '%s'" % text)
    with open(os.path.join(directory, "comparison.csv")) as f:
        timed_out = [row for row in csv.DictReader(f) if row["pattern"] == "05_nccl_mpi"][0]
    if timed_out["speedup"] != "" or timed_out["status"] != "TIMEOUT":
        fail("a timed-out run must have no figures: %s" % timed_out)


class FakePyplot:
    """Stands in for matplotlib's pyplot, its figure and its axes: records every call and draws nothing
    (savefig writes an empty file, which the chart's atomic replace renames into place)."""

    def __init__(self):
        self.calls = []

    def __getattr__(self, name):
        def record(*args, **kwargs):
            self.calls.append((name, args, kwargs))
            if name == "subplots":
                return self, [[self] * args[1]]
            if name == "get_legend_handles_labels":
                return [], []
            if name == "savefig":
                open(args[0], "wb").close()
            return None
        return record


def check_chart_of_failed_run(scripts_dir, work_dir):
    """A run that failed gets its status in the chart, not a bar as if it had been measured, also one that
    wrote no RESULT (a timeout: no speedup at all), and the legend's 'measured' comes with the first bar
    drawn, whichever row that is."""
    sys.path.insert(0, scripts_dir)
    import compare
    rows = []
    for pattern, variant, speedup, status in (("01_single_gpu", "", 1.0, "ok"),
                                              ("03_host_staged_mpi", "pinned", 1.8, "FAILED (exit 1: verification failed)"),
                                              ("05_nccl_mpi", "", None, "TIMEOUT"),
                                              ("06_fwi_shot_parallel", "", 1.9, "ok")):
        rows.append(dict(pattern=pattern, variant=variant, gpus=1 if pattern == "01_single_gpu" else 2,
                         speedup=speedup, predicted_speedup=1.95, combine_share=0.01, status=status))
    plt = FakePyplot()
    os.makedirs(work_dir, exist_ok=True)
    if not compare.draw_chart(plt, os.path.join(work_dir, "chart.png"), rows, "default", None):
        fail("draw_chart drew nothing")
    measured = [kwargs for name, args, kwargs in plt.calls if name == "barh" and kwargs.get("color") == "tab:blue"]
    if len(measured) != 1 or measured[0].get("label") != "measured":
        fail("one measured bar, 06's, labelled for the legend, expected: %s" % measured)
    for status in ("FAILED (exit 1: verification failed)", "TIMEOUT"):
        if not any(name == "text" and args[2] == status for name, args, _ in plt.calls):
            fail("the status %s is not written where its run's bar would be" % status)


# Appended to a copy of scripts/common.sh: its helpers stay, the build is replaced.
FAKE_COMMON = """
configure_and_build() { echo "(build skipped by the test)"; }
BUILD_DIR="$ROOT/build-fake"
"""
FAKE_NVIDIA_SMI = """#!/bin/bash
if [ "$1" = -L ]; then
    for i in $(seq 1 "$FAKE_GPUS"); do echo "GPU $((i - 1)): Fake GPU (UUID: GPU-$i)"; done
    [ "$FAKE_GPUS" -gt 0 ]; exit
fi
echo "Fake GPU"
"""
# %s: the env it prints with --env-json.
FAKE_VISIBLE_GPUS = """#!/bin/bash
[ "$1" = --env-json ] && { echo '%s'; exit 0; }
echo "$FAKE_GPUS"
"""
# Drops the launcher's flags, runs the program with FAKE_RANKS set to -np.
FAKE_MPIRUN = """#!/bin/bash
[ "$1" = --version ] && { echo "mpirun (fake)"; exit 0; }
while [ $# -gt 0 ]; do
    case "$1" in -np) export FAKE_RANKS=$2; shift 2 ;; -x) shift 2 ;; /*) break ;; *) shift ;; esac
done
exec "$@"
"""
# A fake program: prints its arguments and writes a RESULT. An FWI run computes 10 ms per shot of its
# largest share (ceil(shots / GPUs)) and combines in the time COMBINE_S gives its variant; an allreduce
# sweep (02, or --bench-allreduce) takes SWEEP_S of its variant per G bytes (G = 8 x its -b), linearly. So
# the model predicts every FWI run exactly, except 03 pinned, whose runs combine 5x slower than its sweep.
FAKE_PROGRAM = r"""#!/usr/bin/env python3
import json, os, sys
COMBINE_S = {"pageable": 0.004, "pinned": 0.010, "pipelined": 0.002}
SWEEP_S = {"pageable": 0.004, "pinned": 0.002, "pipelined": 0.002}
name, args = os.path.basename(sys.argv[0]), sys.argv[1:]
print("args: " + " ".join(args))
def flag(names, default=None):
    for k, a in enumerate(args[:-1]):
        if a in names:
            return args[k + 1]
    return default
gpus = int(flag(["--gpus", "-g"], os.environ.get("FAKE_RANKS", "1")))
variant = flag(["--combine", "--driver"], "")
with open(os.path.join(os.path.dirname(sys.argv[0]), "..", "fake_results.json")) as f:
    templates = json.load(f)
if name == "02_allreduce_primitives" or "--bench-allreduce" in args:
    low, high = int(flag(["-b"])), int(flag(["-e"]))
    variant = variant or "nccl"
    sizes, n = [], low
    while n <= high:
        t = SWEEP_S.get(variant, 0.0005) * n / (8 * low)
        sizes.append({"bytes": n, "count": n // 4, "time_s": t, "algbw_GBps": n / t / 1e9, "busbw_GBps": n / t / 1e9,
                      "wrong": 0})
        n *= 2
    result = dict(templates["sweep"], pattern=name, variant=variant + (" 1024KiB x1" if variant == "pipelined" else ""),
                  gpus=gpus, ranks=gpus, sizes=sizes)
    print("# Avg bus bandwidth    : 1.00 GB/s")
else:
    result = dict(templates["fwi"], pattern=name, variant=variant, gpus=gpus, ranks=gpus)
    shots = int(flag(["--nshots"], result["shots"]))
    compute = 0.010 * -(-shots // gpus)
    combine = 0.0 if name == "01_single_gpu" else COMBINE_S.get(variant, 0.0005)
    spread = lambda t: {"min": t, "median": t, "max": t}
    result.update(shots=shots, time_per_gradient_s=compute + combine, time_per_iteration_s=compute + combine + 0.001,
                  phases_s={"compute": spread(compute), "wait": spread(0.0), "combine": spread(combine),
                            "update": spread(0.001)},
                  combine_share=combine / (compute + combine + 0.001))
    print("%s: %d GPUs: %g s per gradient" % (name, gpus, result["time_per_gradient_s"]))
print("RESULT " + json.dumps(result))
with open(flag(["--json"]), "w") as f:
    json.dump(result, f)
"""
PATTERNS = ["01_single_gpu", "02_allreduce_primitives", "03_host_staged_mpi", "04_nccl_threads", "05_nccl_mpi",
            "06_fwi_shot_parallel"]
SWEEP = {"schema_version": 2, "kind": "allreduce_sweep", "pattern": "", "variant": "", "gpus": 1, "ranks": 1,
         "sizes": [], "avg_busbw_GBps": 1.0, "wrong_total": 0, "verified": True, "env": ENV}


def write_executable(path, text):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def fake_machine(scripts_dir, work_dir):
    root = os.path.join(work_dir, "runner")
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(os.path.join(root, "repo", "scripts"))
    os.makedirs(os.path.join(root, "path"))
    for name in ("compare.sh", "compare.py", "plotting.py", "result_schema.py", "scaling_model.py"):
        shutil.copy(os.path.join(scripts_dir, name), os.path.join(root, "repo", "scripts", name))
    with open(os.path.join(scripts_dir, "common.sh")) as f:
        common = f.read()
    with open(os.path.join(root, "repo", "scripts", "common.sh"), "w") as f:
        f.write(common + FAKE_COMMON)
    write_executable(os.path.join(root, "path", "nvidia-smi"), FAKE_NVIDIA_SMI)
    write_executable(os.path.join(root, "path", "mpirun"), FAKE_MPIRUN)
    for pattern in PATTERNS:
        os.makedirs(os.path.join(root, "repo", "build-fake", pattern))
        write_executable(os.path.join(root, "repo", "build-fake", pattern, pattern), FAKE_PROGRAM)
    with open(os.path.join(root, "repo", "build-fake", "fake_results.json"), "w") as f:
        json.dump({"fwi": result("", "", 1, 0.5), "sweep": SWEEP}, f)
    os.makedirs(os.path.join(root, "repo", "build-fake", "common"))
    write_executable(os.path.join(root, "repo", "build-fake", "common", "visible_gpus"),
                     FAKE_VISIBLE_GPUS % json.dumps(ENV))
    return root


def run_runner(root, gpus, flags):
    environment = dict(os.environ, FAKE_GPUS=str(gpus), PATH=os.path.join(root, "path") + ":" + os.environ["PATH"])
    environment.pop("CUDA_VISIBLE_DEVICES", None)
    process = subprocess.run(["bash", os.path.join(root, "repo", "scripts", "compare.sh")] + flags,
                             capture_output=True, text=True, timeout=300, env=environment)
    print(process.stdout + process.stderr)
    return process.returncode, process.stdout, process.stderr


def check_predictions(table, stdout):
    """The fake runs follow the model but for 03 pinned (combine 10 ms in the run, 2 ms in its sweep)."""
    for row in table:
        if row["pattern"] == "01_single_gpu":
            if row["predicted_speedup"] != "":
                fail("01 is the reference; it gets no prediction")
            continue
        compute = 0.010 * -(-8 // int(row["gpus"]))
        combine = {"pageable": 0.004, "pinned": 0.002, "pipelined": 0.002}.get(row["variant"], 0.0005)
        if abs(float(row["predicted_gradient_ms"]) - 1e3 * (compute + combine)) > 1e-9:
            fail("%s %s %s GPUs: predicted %s ms, expected %g" % (row["pattern"], row["variant"], row["gpus"],
                                                                   row["predicted_gradient_ms"], 1e3 * (compute + combine)))
        if abs(float(row["predicted_speedup"]) - 0.080 / (compute + combine)) > 1e-9:
            fail("predicted speedup %s, expected 01's 80 ms over the predicted gradient" % row["predicted_speedup"])
        exact = row["variant"] != "pinned"
        if exact != (abs(float(row["prediction_error"])) < 1e-9):
            fail("%s %s %s GPUs: prediction error %s" % (row["pattern"], row["variant"], row["gpus"],
                                                          row["prediction_error"]))
        if row["gpus"] == "2" and row["variant"] == "pageable" and row["biggest_loss"] != "combine 4.00 ms":
            fail("03 pageable on 2 GPUs: biggest loss '%s', expected combine 4.00 ms" % row["biggest_loss"])
    note = ("03_host_staged_mpi pinned, 2 GPU(s): measured 50.00 ms, predicted 42.00 ms (+19%): its combine took "
            "10.00 ms in the run against 2.00 ms from its allreduce sweep")
    if note not in stdout or "compute on one GPU (01_single_gpu, --nshots): 8 shots 80.00 ms" not in stdout:
        fail("the table lacks the note on 03 pinned's missed prediction or the model's inputs")


def check_runner(scripts_dir, work_dir):
    root = fake_machine(scripts_dir, work_dir)
    code, _, stderr = run_runner(root, 2, ["--problem", "huge"])
    if code != 2 or "--problem" not in stderr:
        fail("compare.sh --problem huge: exit %d, expected 2 naming --problem" % code)
    code, _, stderr = run_runner(root, 0, [])
    if code != 3 or len(stderr.strip().splitlines()) != 1 or "no CUDA GPU" not in stderr:
        fail("compare.sh without a GPU: exit %d, expected 3 with one line saying so" % code)

    out = os.path.join(root, "out")
    code, stdout, _ = run_runner(root, 2, ["--out", out])
    if code != 0:
        fail("compare.sh on 2 fake GPUs exited %d" % code)
    with open(os.path.join(out, "comparison.csv")) as f:
        table = list(csv.DictReader(f))
    rows = [(row["pattern"], row["variant"], row["gpus"], row["status"]) for row in table]
    expected = [("01_single_gpu", "", "1", "ok")]
    expected += [("03_host_staged_mpi", v, g, "ok") for v in ("pageable", "pinned", "pipelined") for g in "12"]
    expected += [("04_nccl_threads", d, g, "ok") for d in ("threads", "group") for g in "12"]
    expected += [("05_nccl_mpi", "", g, "ok") for g in "12"] + [("06_fwi_shot_parallel", "", g, "ok") for g in "12"]
    if rows != expected:
        fail("the comparison's rows are %s, expected %s" % (rows, expected))
    with open(os.path.join(out, "comparison.json")) as f:
        if json.load(f)["machine"] != ENV:
            fail("comparison.json does not hold the machine.json that visible_gpus --env-json printed")
    check_predictions(table, stdout)
    logs = os.path.join(out, "runs")
    with open(os.path.join(logs, "manifest.tsv")) as f:
        inputs = [(r["role"], r["pattern"], r["variant"], r["gpus"]) for r in csv.DictReader(f, delimiter="\t")
                  if r["role"] != "fwi"]
    expected_inputs = [("batch", "01_single_gpu", "4-shots", "1")]
    for g in "12":
        expected_inputs += [("sweep", "02_allreduce_primitives", "nccl", g)]
        expected_inputs += [("sweep", "03_host_staged_mpi", v, g) for v in ("pageable", "pinned", "pipelined")]
        expected_inputs += [("sweep", "05_nccl_mpi", "nccl", g)]
    if inputs != expected_inputs:
        fail("the model's input runs are %s, expected %s" % (inputs, expected_inputs))
    with open(os.path.join(logs, "sweep-03_host_staged_mpi-pinned-2gpu.log")) as f:
        log = f.read()
    if "-np 2" not in log or "--bench-allreduce --combine pinned -b 98304 -e 1572864 -f 2 -w 2 -n 5 --isolated" not in log:
        fail("the 03 pinned sweep on 2 GPUs was not started with mpirun -np 2 from G/8 to 2G, each allreduce "
             "timed alone:\n" + log)
    if "each allreduce timed alone, as a run times its combine (--isolated)" not in stdout:
        fail("the comparison does not say that its sweeps timed each allreduce alone")
    with open(os.path.join(logs, "06_fwi_shot_parallel-2gpu.log")) as f:
        log = f.read()
    if "-np 2" not in log or "--no-plots" not in log or "--no-reference" in log:
        fail("06 on 2 GPUs was not started with mpirun -np 2, --no-plots and its reference:\n" + log)
    with open(os.path.join(logs, "04_nccl_threads-group-2gpu.log")) as f:
        if "--gpus 2 --driver group" not in f.read():
            fail("04 was not started with --gpus 2 --driver group")

    code, _, _ = run_runner(root, 1, ["--out", out, "--problem", "large"])
    with open(os.path.join(logs, "05_nccl_mpi-1gpu.log")) as f:
        log = f.read()
    if code != 0 or "--problem large" not in log or "--no-reference" not in log:
        fail("--problem large must run without the in-program references (--no-reference)")


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    scripts_dir, work_dir = sys.argv[1], sys.argv[2]
    script = os.path.join(scripts_dir, "compare.py")
    check_all_ok(script, work_dir)
    check_failures_shown(script, work_dir)
    check_unlike_runs_named(script, work_dir)
    check_chart_of_failed_run(scripts_dir, os.path.join(work_dir, "chart"))
    check_runner(scripts_dir, work_dir)
    print("PASSED")
    return 0


if __name__ == "__main__":
    sys.exit(main())
