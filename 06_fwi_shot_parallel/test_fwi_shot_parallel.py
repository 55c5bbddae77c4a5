#!/usr/bin/env python3
"""End-to-end tests of 06_fwi_shot_parallel, run by CTest (standard library only, no numpy needed).

  plot-script       (cpu) plot_fwi.py on a fake run folder: PNGs, and a clear warning without matplotlib;
                    skipped (77) after the checks it could run where no python3 has matplotlib
  matches-01        (gpu/multigpu, mpi) 06 on --ranks N ends with the same model as 01_single_gpu after the
                    same iterations, to 1e-5 relative L2 (stricter than the 1e-3 of
                    common/tolerances.hpp, which allows for longer runs drifting apart)
  kill-and-resume   (gpu/multigpu, mpi) a run SIGKILLed right after a checkpoint and resumed ends with the
                    final model of an uninterrupted run, byte for byte, on the same rank count
  failed-setup      (gpu, mpi) a run whose NCCL cannot start ends with exit 3 and leaves --out as an earlier
                    run left it (its snapshots too)

GPU tests exit 77 (CTest: skipped) when fewer than --ranks GPUs are visible, or where --mpiexec is not Open
MPI's mpirun, whose flags they pass. Every program runs under a
timeout, and a run that overstays it is terminated with its whole process group.
"""
import argparse
import array
import ast
import glob
import os
import shutil
import signal
import subprocess
import sys

SKIP = 77
PROBLEM = ["--problem", "small", "--nshots", "5"]  # 5 shots: uneven splits on 2 and 4 ranks
RUN_TIMEOUT_S = 240


def fail(message):
    print("FAILED: " + message)
    sys.exit(1)


def visible_gpus(counter):
    """The GPUs the programs will see, counted as they count them (common/visible_gpus). A counter that
    fails or prints no number (a broken build, a driver CUDA cannot use) fails the test (exit 3): a count of
    0 would skip it unseen."""
    try:
        answer = subprocess.run([counter], capture_output=True, text=True, timeout=60)
        if answer.returncode == 0:
            return int(answer.stdout.strip())
        problem = "exit %d: %s" % (answer.returncode, answer.stderr.strip())
    except (OSError, subprocess.TimeoutExpired, ValueError) as error:
        problem = str(error)
    print("the GPU counter %s failed (%s), so the GPUs cannot be counted" % (counter, problem))
    sys.exit(3)


def run(command, timeout_s=RUN_TIMEOUT_S, environment=None):
    """Runs a command in its own process group; returns (exit code, output). Never waits past timeout_s."""
    print("$ " + " ".join(command), flush=True)
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               start_new_session=True, env=environment)
    try:
        output, _ = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        # SIGTERM first: mpirun forwards it to the ranks it started; then SIGKILL whatever is left.
        os.killpg(process.pid, signal.SIGTERM)
        try:
            output, _ = process.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            output, _ = process.communicate()
        print(output)
        fail("timed out after %d s: %s" % (timeout_s, " ".join(command)))
    print(output, flush=True)
    return process.returncode, output


def skip_unless_open_mpi(mpiexec):
    """Exits 77 (skipped), saying why, where mpiexec is another MPI's launcher than Open MPI's mpirun, whose
    flags the runs pass; fails where its --version does not run, fails or says nothing (a broken MPI)."""
    try:
        version = subprocess.run([mpiexec, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as error:
        fail("'%s --version' does not answer (%s): is MPI installed?" % (mpiexec, error))
    answer = version.stdout + version.stderr
    if "Open MPI" in answer or "OpenRTE" in answer:
        return
    if version.returncode != 0 or not answer.strip():
        fail("'%s --version' does not answer (exit %d): is MPI installed?" % (mpiexec, version.returncode))
    print("needs Open MPI's mpirun (the runs pass it --oversubscribe and -x); %s is another launcher: skipped"
          % mpiexec)
    sys.exit(SKIP)


def mpirun(args, ranks, program_args, environment=()):
    """The mpirun command line; `environment`: more NAME=VALUE settings for the ranks."""
    environment_flags = ["-x", "NCCL_NVLS_ENABLE=0"]
    for setting in environment:
        environment_flags += ["-x", setting]
    root_flags = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    return [args.mpiexec] + root_flags + ["--oversubscribe", "--bind-to", "none", "-np", str(ranks)] + \
        environment_flags + [args.program06] + program_args


def read_npy_floats(path):
    """A float32 .npy file (format 1.0, as common/output.cpp writes it) as (shape, array of floats)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:6] != b"\x93NUMPY":
        fail("%s is not a .npy file" % path)
    header_length = int.from_bytes(data[8:10], "little")
    header = ast.literal_eval(data[10:10 + header_length].decode("latin1"))
    if header["descr"] != "<f4":
        fail("%s holds %s, not float32" % (path, header["descr"]))
    body = data[10 + header_length:]
    count = 1
    for n in header["shape"]:
        count *= n
    if len(body) != 4 * count:  # a truncated file would otherwise be compared on what is left of it
        fail("%s holds %d bytes of data, not the %d floats of its shape %s" % (path, len(body), count,
                                                                              header["shape"]))
    values = array.array("f")
    values.frombytes(body)
    return header["shape"], values


def write_npy_floats(path, shape, values, descr="<f4"):
    """values as 32-bit floats, in a .npy file whose header names `descr` ("<c8": complex, for a damaged file)."""
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (descr, ", ".join(str(n) for n in shape))
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode("latin1"))
        f.write(array.array("f", values).tobytes())


def relative_l2(values, reference):
    if len(values) != len(reference):
        fail("%d values compared with %d" % (len(values), len(reference)))
    diff2 = sum((float(a) - float(b)) ** 2 for a, b in zip(values, reference))
    ref2 = sum(float(b) ** 2 for b in reference)
    return (diff2 / ref2) ** 0.5 if ref2 > 0 else diff2 ** 0.5


def fresh_folder(path):
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


def test_plot_script(args):
    folder = fresh_folder(os.path.join(args.work_dir, "run"))
    nz, nx = 24, 32
    initial = [1500.0] * (nz * nx)
    true = [1500.0 if i // nx < nz // 2 else 2500.0 for i in range(nz * nx)]
    final = [v + (30.0 if i // nx == nz // 2 else 0.0) for i, v in enumerate(initial)]
    gradient = [float((i % nx) - nx / 2) for i in range(nz * nx)]
    for name, values in (("true_model", true), ("initial_model", initial), ("final_model", final),
                         ("model_iter_0002", final), ("first_gradient", gradient), ("final_gradient", gradient)):
        write_npy_floats(os.path.join(folder, name + ".npy"), (nz, nx), values)
    with open(os.path.join(folder, "loss_history.json"), "w") as f:
        f.write('{"iteration": [1, 2], "misfit": [4, 3], "relative_misfit": [1, 0.75], '
                '"iteration_seconds": [0.1, 0.1]}\n')

    pictures = ["models.png", "snapshots.png", "gradients.png", "loss.png"]
    made_pictures = False
    # As started (it may run itself again under /usr/bin/python3 to find matplotlib), and with this
    # interpreter only: where that one lacks matplotlib, the script must warn and succeed.
    for environment in (None, dict(os.environ, FWI_PLOT_REEXEC="1")):
        for name in pictures:
            if os.path.exists(os.path.join(folder, name)):
                os.remove(os.path.join(folder, name))
        code, output = run([sys.executable, args.plot_script, folder], timeout_s=120, environment=environment)
        if code != 0:
            fail("plot_fwi.py exited %d" % code)
        if "matplotlib is not installed" in output:
            print("matplotlib missing: the script warned and made no pictures, as it should")
            continue
        for name in pictures:
            with open(os.path.join(folder, name), "rb") as f:
                if f.read(8) != b"\x89PNG\r\n\x1a\n":
                    fail(name + " is not a PNG file")
        made_pictures = True
        print("pictures made: " + ", ".join(pictures))
    code, output = run([sys.executable, args.plot_script, os.path.join(folder, "no_such_folder")], timeout_s=60)
    if code != 2 or "no such folder" not in output:
        fail("plot_fwi.py on a missing folder exited %d, expected 2 naming it:\n%s" % (code, output))
    code, output = run([sys.executable, args.plot_script, "--help"], timeout_s=60)
    if code != 0 or "usage: python3 plot_fwi.py DIR" not in output:
        fail("plot_fwi.py --help exited %d, expected 0 with its usage:\n%s" % (code, output))

    # Stray and damaged files: a name that is not the run's is left alone, a damaged input is named, exit 2.
    write_npy_floats(os.path.join(folder, "model_iter_abcd.npy"), (2, 2), [0.0] * 4)
    code, output = run([sys.executable, args.plot_script, folder], timeout_s=120)
    if code != 0 or "Traceback" in output:
        fail("plot_fwi.py with a stray model_iter_abcd.npy exited %d:\n%s" % (code, output))
    if not made_pictures:  # the damaged files below are read only where pictures are made
        print("no python3 here has matplotlib: the pictures and damaged inputs are not checked: skipped")
        sys.exit(SKIP)
    damaged = [("loss_history.json", lambda path: open(path, "w").write('{"iteration": [1, 2], "relat')),
               ("final_model.npy", lambda path: open(path, "wb").write(b"\x93NUMPY garbage")),
               ("final_model.npy", lambda path: write_npy_floats(path, (nz, nx + 1), [1500.0] * (nz * (nx + 1)))),
               ("final_model.npy", lambda path: write_npy_floats(path, (nz, nx // 2), initial, "<c8")),
               ("final_model.npy", lambda path: write_npy_floats(path, (nz, nx), [float("nan")] * (nz * nx))),
               ("loss_history.json",
                lambda path: open(path, "w").write('{"iteration": [1, 2], "relative_misfit": [1, 1%s]}' % ("0" * 400))),
               # values no run writes: a misfit below 0, a boolean, no entries
               ("loss_history.json",
                lambda path: open(path, "w").write('{"iteration": [1, 2], "relative_misfit": [0, -1]}')),
               ("loss_history.json",
                lambda path: open(path, "w").write('{"iteration": [true], "relative_misfit": [1]}')),
               ("loss_history.json", lambda path: open(path, "w").write('{"iteration": [], "relative_misfit": []}'))]
    for name, damage in damaged:
        path = os.path.join(folder, name)
        with open(path, "rb") as f:
            kept = f.read()
        damage(path)
        code, output = run([sys.executable, args.plot_script, folder], timeout_s=120)
        with open(path, "wb") as f:
            f.write(kept)
        if code != 2 or name not in output or "Traceback" in output:
            fail("plot_fwi.py with a damaged %s exited %d (expected 2, naming the file):\n%s" % (name, code, output))
        print("damaged %s: exit 2, %s" % (name, output.strip().splitlines()[-1]))
    # A FIFO in an input's place is not read (the read would block until a writer came): left out, exit 0.
    for name in ("true_model.npy", "loss_history.json"):
        path = os.path.join(folder, name)
        os.rename(path, path + ".kept")
        os.mkfifo(path)
    code, output = run([sys.executable, args.plot_script, folder], timeout_s=60)
    for name in ("true_model.npy", "loss_history.json"):
        path = os.path.join(folder, name)
        os.remove(path)
        os.rename(path + ".kept", path)
    if code != 0 or "Traceback" in output:
        fail("plot_fwi.py with FIFOs as inputs exited %d (expected 0, leaving them out):\n%s" % (code, output))
    # A picture that cannot be written: a folder where models.png would go.
    os.remove(os.path.join(folder, "models.png"))
    os.mkdir(os.path.join(folder, "models.png"))
    code, output = run([sys.executable, args.plot_script, folder], timeout_s=120)
    os.rmdir(os.path.join(folder, "models.png"))
    if code != 2 or "cannot write a picture" not in output or "Traceback" in output:
        fail("plot_fwi.py with a folder named models.png exited %d (expected 2):\n%s" % (code, output))


def require_gpus(args, count):
    gpus = visible_gpus(args.visible_gpus)
    if gpus < count:
        print("%d GPU(s) visible, this test needs %d: skipped" % (gpus, count))
        sys.exit(SKIP)


def test_matches_01(args):
    require_gpus(args, args.ranks)
    skip_unless_open_mpi(args.mpiexec)
    iterations = ["--iterations", "10"]
    out01 = fresh_folder(os.path.join(args.work_dir, "01"))
    out06 = fresh_folder(os.path.join(args.work_dir, "06"))
    code, _ = run([args.program01] + PROBLEM + iterations + ["--out", out01])
    if code != 0:
        fail("01_single_gpu exited %d" % code)
    code, _ = run(mpirun(args, args.ranks, PROBLEM + iterations + ["--out", out06, "--no-plots"]))
    if code != 0:
        fail("06_fwi_shot_parallel on %d ranks exited %d (1: its own check against its single-GPU run failed)"
             % (args.ranks, code))
    shape01, model01 = read_npy_floats(os.path.join(out01, "final_model.npy"))
    shape06, model06 = read_npy_floats(os.path.join(out06, "final_model.npy"))
    if shape01 != shape06:
        fail("final models have shapes %s (01) and %s (06)" % (shape01, shape06))
    difference = relative_l2(model06, model01)
    print("final model after 10 iterations, 06 on %d ranks vs 01: rel L2 %.2e (tolerance 1e-5)"
          % (args.ranks, difference))
    if not difference <= 1e-5:
        fail("06's final model differs from 01's beyond 1e-5")


def checkpoint_iterations_done(path):
    """The iteration count of a checkpoint (common/checkpoint.cpp: magic word, then int32 iterations done)."""
    if not os.path.exists(path):
        return None
    with open(path, "rb") as f:
        head = f.read(12)
    return int.from_bytes(head[8:12], "little", signed=True) if head[:8] == b"FWICKPT1" else None


def misfit_column(folder):
    with open(os.path.join(folder, "loss_history.csv")) as f:
        return [line.split(",")[1] for line in f.read().splitlines()[1:]]


def test_kill_and_resume(args):
    require_gpus(args, args.ranks)
    skip_unless_open_mpi(args.mpiexec)
    common = PROBLEM + ["--iterations", "6", "--checkpoint-every", "2", "--no-plots"]
    whole = fresh_folder(os.path.join(args.work_dir, "uninterrupted"))
    killed = fresh_folder(os.path.join(args.work_dir, "killed"))

    code, _ = run(mpirun(args, args.ranks, common + ["--no-reference", "--out", whole]))
    if code != 0:
        fail("the uninterrupted run exited %d" % code)

    code, _ = run(mpirun(args, args.ranks, common + ["--no-reference", "--out", killed,
                                                     "--kill-after-checkpoint", "4"]))
    if code == 0:
        fail("the run meant to be killed after checkpoint 4 exited 0")
    checkpoint_iteration = checkpoint_iterations_done(os.path.join(killed, "checkpoint.fwi"))
    if checkpoint_iteration != 4:
        fail("the killed run left a checkpoint of iteration %s, expected 4" % checkpoint_iteration)
    if os.path.exists(os.path.join(killed, "final_model.npy")):
        fail("the killed run wrote a final model")
    # A temporary is named after its file, the writer's pid and a counter (common/output.cpp).
    leftovers = glob.glob(os.path.join(killed, "checkpoint.fwi.tmp*"))
    if leftovers:
        fail("a temporary checkpoint file was left behind: %s" % leftovers)

    # The resumed run also checks itself against the single-GPU run of its 2 iterations.
    code, output = run(mpirun(args, args.ranks, common + ["--out", killed, "--resume", killed]))
    if code != 0:
        fail("the resumed run exited %d" % code)
    if "resuming from" not in output or "after iteration 4" not in output:
        fail("the resumed run did not say it resumed after iteration 4")

    with open(os.path.join(whole, "final_model.npy"), "rb") as a, open(os.path.join(killed, "final_model.npy"), "rb") as b:
        if a.read() != b.read():
            fail("the resumed run's final model differs from the uninterrupted run's")
    if misfit_column(whole) != misfit_column(killed):
        fail("the loss histories differ: %s vs %s" % (misfit_column(whole), misfit_column(killed)))
    print("killed after checkpoint 4 and resumed on %d rank(s): final model identical byte for byte, "
          "loss history identical" % args.ranks)


def folder_contents(folder):
    """Every file in `folder` (no subfolders here) by name, with its bytes."""
    contents = {}
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name), "rb") as f:
            contents[name] = f.read()
    return contents


def test_failed_setup(args):
    require_gpus(args, args.ranks)
    skip_unless_open_mpi(args.mpiexec)
    folder = fresh_folder(os.path.join(args.work_dir, "earlier-run"))
    flags = PROBLEM + ["--iterations", "2", "--save-every", "1", "--no-plots", "--no-reference", "--out", folder]
    code, _ = run(mpirun(args, args.ranks, flags))
    if code != 0:
        fail("the earlier run exited %d" % code)
    before = folder_contents(folder)
    if "model_iter_0001.npy" not in before:
        fail("the earlier run wrote no snapshot: %s" % sorted(before))
    # No network interface of that name: NCCL's bootstrap cannot start, after every rank has its GPU and
    # shots. A run that went on would remove the earlier run's snapshots (they are not its own).
    code, output = run(mpirun(args, args.ranks, flags, environment=["NCCL_SOCKET_IFNAME=no_such_interface"]))
    if code != 3:
        fail("the run whose NCCL cannot start exited %d, expected 3" % code)
    # That NCCL's id could not be made (the failed call, or rank 0's message relayed), not the banner's
    # "NCCL 2.x" that every run prints before its set-up.
    if "ncclGetUniqueId" not in output:
        fail("the run whose NCCL cannot start did not say that NCCL's id could not be made (ncclGetUniqueId)")
    after = folder_contents(folder)
    if after != before:
        changed = sorted(set(before) ^ set(after) | {n for n in before if n in after and before[n] != after[n]})
        fail("the failed run changed --out: %s" % changed)
    print("a run whose NCCL could not start (exit 3) left the earlier run's %d files as they were" % len(after))

    # A rank that fails before the others are set up (here: one that sees no GPU) ends the job at once
    # (MPI_Abort), rank 0 with it, before rank 0 could remove a folder it had made: a new --out is made only
    # once every rank is set up, so none is left behind.
    never_made = os.path.join(args.work_dir, "never-made")
    shutil.rmtree(never_made, ignore_errors=True)
    flags[flags.index(folder)] = never_made
    command = mpirun(args, args.ranks, flags) + \
        [":", "-np", "1", "-x", "NCCL_NVLS_ENABLE=0", "env", "CUDA_VISIBLE_DEVICES=", args.program06] + flags
    code, output = run(command)
    if code == 0:
        fail("the run with a rank that sees no GPU exited 0")
    if "sees no CUDA GPU" not in output:
        fail("the run with a rank that sees no GPU did not say so")
    if os.path.exists(never_made):
        fail("the failed run left its new --out folder behind: %s" % never_made)
    print("a run with a rank that sees no GPU (exit %d) left no --out folder behind" % code)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("test", choices=["plot-script", "matches-01", "kill-and-resume", "failed-setup"])
    parser.add_argument("--program06", required=True)
    parser.add_argument("--program01", required=True)
    parser.add_argument("--mpiexec", default="mpirun")
    parser.add_argument("--plot-script", required=True)
    parser.add_argument("--visible-gpus", required=True, help="common/visible_gpus, which counts the GPUs")
    parser.add_argument("--work-dir", required=True)
    parser.add_argument("--ranks", type=int, default=1)
    args = parser.parse_args()
    os.environ["NCCL_NVLS_ENABLE"] = "0"
    os.makedirs(args.work_dir, exist_ok=True)
    {"plot-script": test_plot_script, "matches-01": test_matches_01,
     "kill-and-resume": test_kill_and_resume, "failed-setup": test_failed_setup}[args.test](args)
    print("PASSED")


if __name__ == "__main__":
    main()
