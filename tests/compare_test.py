#!/usr/bin/env python3
"""CPU tests of scripts/compare.py, the comparison's table, on a copy of a stored comparison
(docs/results) spoiled one way at a time: a RESULT that does not follow the schema (a time that is not
positive, say) is not read (its row says why), a row the scaling model cannot predict gets a note, a
machine.json without a GPU's name is left out, a manifest that is not UTF-8, lists no runs or holds a row
compare.sh never writes is refused (exit 2), as are a comparison that did not finish, a RESULT file that
is not JSON and a folder of docs/results itself, and an output that cannot be written is an exit 3.
Never a traceback. The modules it imports, run alone, say what they are.

usage: compare_test.py
"""
import csv
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "compare.py")
STORED = os.path.join(ROOT, "docs", "results", "4xH200-2026-11-22", "compare-default")


class Compare(unittest.TestCase):
    def setUp(self):
        self.work = tempfile.mkdtemp()
        self.dir = os.path.join(self.work, "compare")
        self.fresh()

    def fresh(self):
        shutil.rmtree(self.dir, ignore_errors=True)
        shutil.copytree(STORED, self.dir)

    def tearDown(self):
        shutil.rmtree(self.work)

    def edit(self, pattern, change):
        """change(obj) on every RESULT of DIR/runs whose name matches pattern."""
        paths = glob.glob(os.path.join(self.dir, "runs", pattern))
        self.assertTrue(paths, pattern)
        for path in paths:
            with open(path) as f:
                obj = json.load(f)
            change(obj)
            with open(path, "w") as f:
                json.dump(obj, f)

    def run_compare(self, expected_code):
        process = subprocess.run([sys.executable, SCRIPT, self.dir], capture_output=True, text=True, timeout=120)
        output = process.stdout + process.stderr
        self.assertNotIn("Traceback", output)
        self.assertEqual(process.returncode, expected_code, output)
        return output

    def test_stored_comparison(self):
        self.assertNotIn("not predicted", self.run_compare(0))
        # Written as stored, byte for byte, but for the CSV's line ends: \n now, as in the other files (this
        # record's CSV has the \r\n of Python's csv module).
        for name in ("comparison.txt", "comparison.md", "comparison.csv", "comparison.json"):
            with open(os.path.join(self.dir, name), "rb") as made, open(os.path.join(STORED, name), "rb") as stored:
                self.assertEqual(made.read(), stored.read().replace(b"\r\n", b"\n"), name)

    def test_other_processes_on_the_gpus_are_a_note(self):
        """compare.sh's runs/gpu-sharing.txt becomes one note under the table, each check's processes together,
        in comparison.txt and comparison.json alike."""
        with open(os.path.join(self.dir, "runs", "gpu-sharing.txt"), "w") as f:
            f.write("other processes on the runs' GPUs before the first run:\n"
                    "  GPU 0: pid 4242 (python3, 20.0 GiB)\n  GPU 1: pid 77 (not visible from here)\n"
                    "other processes on the runs' GPUs after the last run:\n  GPU 0: pid 4242 (python3, 20.0 GiB)\n")
        self.run_compare(0)
        note = ("other processes held the runs' GPUs, so if they computed, the times are slower than on idle GPUs "
                "and vary (runs/gpu-sharing.txt): before the first run: GPU 0: pid 4242 (python3, 20.0 GiB), "
                "GPU 1: pid 77 (not visible from here); after the last run: GPU 0: pid 4242 (python3, 20.0 GiB)")
        with open(os.path.join(self.dir, "comparison.txt")) as f:
            self.assertIn("\n" + note + "\n", f.read())
        with open(os.path.join(self.dir, "comparison.json")) as f:
            self.assertEqual(json.load(f)["notes"][-1], note)
        with open(os.path.join(self.dir, "comparison.md")) as f:  # pasted, the table keeps its notes
            self.assertIn("|\n\n" + note + "\n", f.read())

    def test_stored_results_are_refused(self):
        """The stored folder itself, or a link to it, is refused and left as it was; a recording's own is not."""
        link = os.path.join(self.work, "link")
        os.symlink(STORED, link)
        environment = dict(os.environ)
        environment.pop("FWI_RECORDING_INTO", None)
        for directory in (STORED, link):
            before = os.stat(os.path.join(STORED, "comparison.csv")).st_mtime_ns
            process = subprocess.run([sys.executable, SCRIPT, directory], capture_output=True, text=True, timeout=120,
                                     env=environment)
            self.assertEqual(process.returncode, 2, process.stderr)
            self.assertIn("is in docs/results, the stored results", process.stderr)
            self.assertEqual(os.stat(os.path.join(STORED, "comparison.csv")).st_mtime_ns, before)
        sys.path.insert(0, os.path.dirname(SCRIPT))
        import compare
        recording = os.path.dirname(STORED)
        saved = os.environ.get("FWI_RECORDING_INTO")
        os.environ["FWI_RECORDING_INTO"] = recording
        try:
            self.assertFalse(compare.in_stored_results(STORED))
            self.assertTrue(compare.in_stored_results(os.path.join(os.path.dirname(recording), "other", "compare")))
        finally:
            os.environ.pop("FWI_RECORDING_INTO")
            if saved is not None:
                os.environ["FWI_RECORDING_INTO"] = saved
        self.assertFalse(compare.in_stored_results(self.dir))

    def test_result_off_schema_is_not_read(self):
        self.edit("01_single_gpu-1gpu.json", lambda r: r.update(time_per_gradient_s="abc"))
        self.edit("05_nccl_mpi-2gpu.json", lambda r: r.update(combine_share="x"))
        self.edit("05_nccl_mpi-3gpu.json", lambda r: r["verification"].update(grad_rel_diff="x"))
        output = self.run_compare(1)
        self.assertIn("invalid RESULT: time_per_gradient_s: expected number", output)
        self.assertIn("invalid RESULT: combine_share: expected number", output)
        self.assertIn("invalid RESULT: verification.grad_rel_diff: expected number", output)

    def test_sweeps_the_model_cannot_use(self):
        for sizes, reason in (([], "the sweep has 0 size(s)"), ([0], "the sweep has 1 size(s)"),
                              ([0, 0], "an alpha-beta line needs two different sizes")):
            self.fresh()
            self.edit("sweep-*.json", lambda r: r.update(sizes=[r["sizes"][k] for k in sizes]))
            self.assertIn("05_nccl_mpi 2 GPU(s): not predicted: " + reason, self.run_compare(0))

    def test_how_the_sweeps_were_timed_is_said(self):
        # This record's sweeps ran before --isolated: batches back to back.
        self.assertIn("of each sweep; batches of allreduces back to back (sweeps without --isolated):",
                      self.run_compare(0))

        def add_isolated(log):
            with open(log) as f:
                first, rest = f.readline(), f.read()
            with open(log, "w") as f:
                f.write(first.rstrip("\n") + " --isolated\n" + rest)

        logs = sorted(glob.glob(os.path.join(self.dir, "runs", "sweep-*.log")))
        for log in logs:
            add_isolated(log)
        output = self.run_compare(0)
        self.assertIn("of each sweep; each allreduce timed alone, as a run times its combine (--isolated):", output)
        self.assertNotIn(", alone)", output)

        # Sweeps timed both ways: each line says which.
        self.fresh()
        add_isolated(os.path.join(self.dir, "runs", "sweep-05_nccl_mpi-nccl-2gpu.log"))
        output = self.run_compare(0)
        self.assertIn("of each sweep; timed as each line says:", output)
        self.assertRegex(output, r"05_nccl_mpi +nccl +2 GPU\(s\): .*B, timed alone\)")
        self.assertRegex(output, r"05_nccl_mpi +nccl +1 GPU\(s\): .*B, back to back\)")

        # A sweep whose log does not say how it ran is not said to have run either way.
        self.fresh()
        with open(os.path.join(self.dir, "runs", "sweep-05_nccl_mpi-nccl-2gpu.log"), "w") as f:
            f.write("no command line\n")
        output = self.run_compare(0)
        self.assertIn("of each sweep; timed as each line says:", output)
        self.assertRegex(output, r"05_nccl_mpi +nccl +2 GPU\(s\): .*B, timing unknown \(its log has no command line\)\)")

    def test_no_shots_and_no_time(self):
        self.edit("01_single_gpu-1gpu.json", lambda r: r.update(shots=0))
        self.assertIn("not predicted: no verified 01_single_gpu run of all 8 shots", self.run_compare(0))
        self.fresh()

        # A time that is not positive is no measurement: the schema refuses it, and the row says so.
        self.edit("05_nccl_mpi-2gpu.json", lambda r: r.update(time_per_gradient_s=0))
        self.assertIn("invalid RESULT: time_per_gradient_s: 0 is not a positive time", self.run_compare(1))
        self.fresh()
        self.edit("01_single_gpu-1gpu.json", lambda r: r.update(time_per_gradient_s=-1))
        self.assertIn("time_per_gradient_s: -1 is not a positive time", self.run_compare(1))

    def manifest_rows(self):
        with open(os.path.join(self.dir, "runs", "manifest.tsv")) as f:
            return [line.rstrip("\n").split("\t") for line in f]

    def write_manifest(self, rows):
        with open(os.path.join(self.dir, "runs", "manifest.tsv"), "w") as f:
            f.write("".join("\t".join(row) + "\n" for row in rows))

    def set_status(self, json_name, status):
        self.write_manifest([row[:4] + [status] + row[5:] if row[5] == json_name else row
                             for row in self.manifest_rows()])

    def csv_row(self, pattern, variant, gpus):
        with open(os.path.join(self.dir, "comparison.csv")) as f:
            return next(r for r in csv.DictReader(f) if (r["pattern"], r["variant"], r["gpus"]) == (pattern, variant, gpus))

    def test_a_failed_run_keeps_its_times(self):
        """A row whose run failed (exit 1) but wrote a RESULT that follows the schema shows that RESULT's
        times beside its status."""
        self.set_status("05_nccl_mpi-2gpu.json", "1")
        output = self.run_compare(1)
        self.assertIn("FAILED (exit 1: verification failed)", output)
        row = self.csv_row("05_nccl_mpi", "", "2")
        self.assertEqual((row["status"], row["time_per_gradient_ms"] != "", row["speedup"] != ""),
                         ("FAILED (exit 1: verification failed)", True, True), row)

    def test_a_failed_baseline_is_no_reference(self):
        """01 failed: no speedup is taken against it, and the model does not use its compute."""
        self.set_status("01_single_gpu-1gpu.json", "1")
        output = self.run_compare(1)
        self.assertIn("not predicted: no verified 01_single_gpu run of all 8 shots", output)
        self.assertEqual(self.csv_row("05_nccl_mpi", "", "2")["speedup"], "")

    def test_an_ok_run_without_a_result_is_not_ok(self):
        os.remove(os.path.join(self.dir, "runs", "05_nccl_mpi-2gpu.json"))
        output = self.run_compare(1)
        self.assertIn("ok, but no RESULT", output)
        self.assertIn("1 of 29 runs did not finish verified", output)

    def test_a_run_faster_than_predicted_gets_a_note(self):
        """A prediction missed by more than 10% either way is explained under the table."""
        self.edit("05_nccl_mpi-2gpu.json", lambda r: r.update(time_per_gradient_s=r["time_per_gradient_s"] / 2))
        output = self.run_compare(0)
        self.assertRegex(output, r"05_nccl_mpi 2 GPU\(s\): measured [0-9.]+ ms, predicted [0-9.]+ ms \(-4[0-9]%\): its ")

    def test_machine_json_without_a_gpu_name(self):
        path = os.path.join(self.dir, "machine.json")
        with open(path) as f:
            machine = json.load(f)
        del machine["gpus"][0]["name"]
        with open(path, "w") as f:
            json.dump(machine, f)
        self.assertIn("machine.json: env.gpus[0].name: missing; it is left out", self.run_compare(0))

    def test_bad_manifest(self):
        manifest = os.path.join(self.dir, "runs", "manifest.tsv")
        with open(manifest, "ab") as f:
            f.write(b"fwi\t\xff\t\t1\t0\tx.json\tx.log\n")
        self.assertIn("manifest.tsv: not UTF-8 text", self.run_compare(2))
        for text in ("", "role\tpattern\tvariant\tgpus\tstatus\tjson\tlog\n"):
            with open(manifest, "w") as f:
                f.write(text)
            self.assertIn("manifest.tsv lists no runs", self.run_compare(2))
        with open(manifest, "w") as f:
            f.write("role\tpattern\tvariant\tgpus\tstatus\tjson\tlog\nfwi\t01_single_gpu\t\t%s\t0\tx.json\tx.log\n"
                    % ("9" * 5000))
        self.assertIn("is not a GPU count", self.run_compare(2))
        rows = [line.split("\t") for line in "".join(open(os.path.join(STORED, "runs", "manifest.tsv"))).splitlines()]
        self.write_manifest(rows[:2] + [rows[2][:3] + ["0"] + rows[2][4:]] + rows[3:])  # 0 GPUs: no count
        self.assertIn("line 3: gpus '0' is not a GPU count", self.run_compare(2))
        self.write_manifest([row[:6] for row in rows])  # no log column: another tool's, or an older one's
        self.assertIn("manifest.tsv line 2: no log", self.run_compare(2))
        # Rows compare.sh never writes: a role no table has, a status that is no exit code, a run twice.
        self.write_manifest(rows[:2] + [["xxx"] + rows[2][1:]] + rows[3:])
        self.assertIn("line 3: role 'xxx' is none of fwi, batch, sweep", self.run_compare(2))
        self.write_manifest(rows[:2] + [rows[2][:4] + ["\x1b[31m"] + rows[2][5:]] + rows[3:])
        self.assertIn("line 3: status '\\x1b[31m' is not an exit code", self.run_compare(2))
        self.write_manifest(rows[:2] + [rows[2][:1] + ["05_nccl_mpi\x1b]0;x\x07"] + rows[2][2:]] + rows[3:])
        self.assertIn("line 3: pattern '05_nccl_mpi\\x1b]0;x\\x07' is not a lesson's pattern", self.run_compare(2))
        self.write_manifest(rows[:2] + [rows[2][:2] + ["pinned <b>"] + rows[2][3:]] + rows[3:])
        self.assertIn("line 3: variant 'pinned <b>' is not a lesson's variant", self.run_compare(2))
        self.write_manifest(rows[:2] + [rows[2] + ["extra"]] + rows[3:])
        self.assertIn("line 3: more columns than the header's 7", self.run_compare(2))
        for name in ("/dev/zero", "..", "../machine.json", "x.log"):  # not a RESULT file of runs/
            self.write_manifest(rows[:2] + [rows[2][:5] + [name] + rows[2][6:]] + rows[3:])
            self.assertIn("line 3: json %s is not a .json file's name" % ascii(name), self.run_compare(2))
        self.write_manifest(rows + [rows[3]])
        self.assertIn("line %d: the same run as line 4" % (len(rows) + 1), self.run_compare(2))

    def test_an_unfinished_comparison_is_refused(self):
        """compare.sh's runs/unfinished, left by a comparison stopped before its last run."""
        with open(os.path.join(self.dir, "runs", "unfinished"), "w") as f:
            f.write("scripts/compare.sh has not finished this comparison\n")
        self.assertIn("this comparison did not finish", self.run_compare(2))

    def test_spoiled_result_files(self):
        """A RESULT file that is not JSON is refused (no run writes one); one of the wrong kind or GPU count
        for its run, or with a kind or a number no run writes, only loses its row."""
        baseline = os.path.join(self.dir, "runs", "01_single_gpu-1gpu.json")
        with open(baseline, "r+") as f:
            f.truncate(100)
        self.assertIn("01_single_gpu-1gpu.json: cannot be read as JSON", self.run_compare(2))
        self.fresh()
        shutil.copy(os.path.join(self.dir, "runs", "sweep-02_allreduce_primitives-nccl-1gpu.json"), baseline)
        self.run_compare(1)
        with open(os.path.join(self.dir, "comparison.txt")) as f:
            self.assertIn("RESULT of another kind (allreduce_sweep for a fwi run)", f.read())
        self.fresh()
        self.edit("05_nccl_mpi-2gpu.json", lambda obj: obj.update(gpus=4))  # another run's RESULT
        self.assertIn("RESULT of another run (4 GPU(s) for a 2-GPU run)", self.run_compare(1))
        self.fresh()
        self.edit("05_nccl_mpi-2gpu.json", lambda obj: obj.update(pattern="06_fwi_shot_parallel"))
        self.assertIn("RESULT of another run (06_fwi_shot_parallel for a 05_nccl_mpi run)", self.run_compare(1))
        self.fresh()
        self.edit("04_nccl_threads-group-2gpu.json", lambda obj: obj.update(variant="threads"))
        self.assertIn("RESULT of another run (04_nccl_threads threads for a 04_nccl_threads group run)",
                      self.run_compare(1))
        self.fresh()
        # A time too small to divide by: no speedup, and JSON without Infinity.
        self.edit("05_nccl_mpi-2gpu.json", lambda obj: obj.update(time_per_gradient_s=5e-324))
        self.run_compare(0)
        with open(os.path.join(self.dir, "comparison.json")) as f:
            made = json.load(f, parse_constant=lambda name: self.fail("comparison.json holds " + name))
        row = next(r for r in made["rows"] if r["pattern"] == "05_nccl_mpi" and r["gpus"] == 2)
        self.assertIsNone(row["speedup"])
        self.fresh()
        self.edit("01_single_gpu-1gpu.json", lambda obj: obj.update(kind=[]))
        self.run_compare(1)
        self.fresh()
        self.edit("04_nccl_threads-group-2gpu.json", lambda obj: obj.update(gradient_bytes=10 ** 400))
        self.run_compare(1)
        with open(os.path.join(self.dir, "comparison.txt")) as f:
            self.assertIn("beyond any count or measurement", f.read())

    def test_model_inputs_that_failed_are_listed(self):
        # A sweep that timed out (its RESULT missing) and a batch run that failed verification (exit 1).
        manifest = os.path.join(self.dir, "runs", "manifest.tsv")
        with open(manifest, "a") as f:
            f.write("sweep\t02_allreduce_primitives\tnccl\t8\ttimeout\t\tsweep-timeout.log\n")
        self.edit("batch-01_single_gpu-2-shots-1gpu.json", lambda r: r.update(verified=False))
        output = self.run_compare(1)  # runs that did not finish verified: exit 1, after the table
        self.assertIn("model inputs that did not finish verified", output)
        self.assertIn("sweep 02_allreduce_primitives nccl, 8 GPU(s) (", output)
        self.assertIn("): sweep-timeout.log", output)
        self.assertIn("batch 01_single_gpu 2-shots, 1 GPU(s) (NOT VERIFIED): batch-01_single_gpu-2-shots-1gpu.log",
                      output)
        # In every output, not only the printed table: a JSON that showed every row "ok" would hide why the
        # comparison exited 1.
        with open(os.path.join(self.dir, "comparison.json")) as f:
            self.assertEqual(len(json.load(f)["failed_inputs"]), 2)
        with open(os.path.join(self.dir, "comparison.md")) as f:
            self.assertIn("model inputs that did not finish verified (their rows are not predicted): ", f.read())

    def test_output_that_cannot_be_written(self):
        for name in ("comparison.txt", "comparison.json"):
            self.fresh()
            target = os.path.join(self.dir, name)
            if os.path.exists(target):
                os.remove(target)
            os.mkdir(target)  # a folder where the file goes
            self.assertIn("compare: error: cannot write the comparison in", self.run_compare(3))

    def test_standard_output_that_cannot_be_written(self):
        """Closed, on a full disk or a pipe whose reader has gone: exit 3 with one line on stderr, never a
        traceback, and the comparison's files are written all the same."""
        for stdout in ("closed", "/dev/full", "pipe"):
            self.fresh()
            os.remove(os.path.join(self.dir, "comparison.txt"))
            if stdout == "pipe":
                process = subprocess.Popen([sys.executable, SCRIPT, self.dir], stdout=subprocess.PIPE,
                                           stderr=subprocess.PIPE, text=True)
                process.stdout.close()  # the reader goes before anything is written
                error = process.stderr.read()
                process.wait(timeout=120)
                code = process.returncode
            else:
                with open(os.devnull if stdout == "closed" else stdout, "w") as target:
                    process = subprocess.run([sys.executable, SCRIPT, self.dir], stdout=target, stderr=subprocess.PIPE,
                                             text=True, timeout=120,
                                             preexec_fn=(lambda: os.close(1)) if stdout == "closed" else None)
                error, code = process.stderr, process.returncode
            self.assertNotIn("Traceback", error, stdout)
            self.assertEqual(code, 3, stdout + ": " + error)
            self.assertIn("compare: environment: standard output could not be written", error)
            self.assertTrue(os.path.isfile(os.path.join(self.dir, "comparison.txt")), stdout)

    def test_help(self):
        process = subprocess.run([sys.executable, SCRIPT, "--help"], capture_output=True, text=True, timeout=60)
        self.assertEqual(process.returncode, 0)
        self.assertIn("usage: python3 scripts/compare.py DIR", process.stdout)

    def test_a_folder_that_is_not_a_comparison_is_named_with_why(self):
        for directory, why in ((os.path.join(self.dir, "no-such-folder"), "no such folder"),
                               (self.work, "it has no runs/manifest.tsv")):
            process = subprocess.run([sys.executable, SCRIPT, directory], capture_output=True, text=True, timeout=60)
            self.assertEqual(process.returncode, 2, process.stderr)
            self.assertIn("compare: %s: %s" % (directory, why), process.stderr)

    def test_its_modules_run_alone(self):
        """The modules compare.py imports say what they are (--help) and refuse arguments (exit 2)."""
        for name, text in (("plotting.py", "matplotlib for the suite's plotting scripts"),
                           ("scaling_model.py", "The comparison's scaling model")):
            script = os.path.join(ROOT, "scripts", name)
            process = subprocess.run([sys.executable, script, "--help"], capture_output=True, text=True, timeout=60)
            self.assertEqual((process.returncode, process.stderr), (0, ""), name)
            self.assertIn(text, process.stdout)
            process = subprocess.run([sys.executable, script, "out"], capture_output=True, text=True, timeout=60)
            self.assertEqual(process.returncode, 2, name)
            self.assertIn("it takes no arguments", process.stderr)


if __name__ == "__main__":
    unittest.main()
