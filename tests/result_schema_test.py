#!/usr/bin/env python3
"""Tests of the RESULT schema (scripts/result_schema.py), with plain python3.

usage: result_schema_test.py [--visible-gpus PATH/TO/visible_gpus]

A sample of every kind is valid; a missing field, a wrong type, an unknown top-level key, another schema
version and NaN are violations, while extra keys inside details and at env's top level are not; the
command line finds RESULT lines in logs and --json files and exits 1 on a violation. With --visible-gpus,
the env this machine reports (visible_gpus --env-json) follows the schema too. docs/RESULT.md names every
field of the schema.
"""
import copy
import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import result_schema  # noqa: E402

SCRIPT = os.path.join(ROOT, "scripts", "result_schema.py")
VISIBLE_GPUS = None  # set from --visible-gpus

ENV = {
    "hostname": "node1", "utc_time": "2025-06-01T08:30:00Z", "git_commit": "0123456789ab-dirty",
    "build_type": "Release", "cuda_architectures": "90", "gpu_count": 2,
    "gpus": [{"index": i, "name": "NVIDIA H100 80GB HBM3", "pci_bus_id": "0000:1%d:00.0" % i,
              "memory_bytes": 85029158912, "sm": "sm_90"} for i in range(2)],
    "driver_version": "13.0", "nvidia_driver_version": "580.82.07", "cuda_runtime_version": "13.0",
    "links": [{"gpus": [0, 1], "link": "NVLink"}], "nccl_version": "2.28.3",
    "mpi_library_version": "Open MPI v4.1.4, package: Debian OpenMPI", "nccl_env": {"NCCL_NVLS_ENABLE": "0"},
}
SPREAD = {"min": 0.01, "median": 0.011, "max": 0.012}
SAMPLES = {
    "fwi": {
        "schema_version": 2, "kind": "fwi", "pattern": "05_nccl_mpi", "variant": "", "gpus": 2, "ranks": 2,
        "problem": "default", "grid": [384, 512], "shots": 8, "nt": 2000, "iterations": 3, "first_iteration": 1,
        "time_per_gradient_s": 0.0123, "time_per_iteration_s": 0.0124,
        "phases_s": {"compute": SPREAD, "wait": SPREAD, "combine": SPREAD, "update": SPREAD},
        "combine_share": 0.016, "gradient_bytes": 786432,
        "reference": {"time_per_gradient_s": 0.025, "speedup": 2.03, "efficiency": 1.01},
        "verification": {"grad_rel_diff": 4.2e-08, "misfit_rel_diff": 1.3e-16, "model_rel_diff": None,
                         "models_identical": True, "misfit_first": 26.97, "misfit_final": 23.44,
                         "tolerances": {"gradient": 1e-05, "misfit": 1e-06, "model": 1e-06}},
        "details": {"to_host_s": 0.0001, "anything": ["goes", "here"]}, "verified": True, "env": ENV,
    },
    "verify": {
        "schema_version": 2, "kind": "verify", "pattern": "01_single_gpu", "variant": "verify", "problem": "small",
        "grid": [64, 96], "traces_rel_l2": 3.4e-06, "gradient_rel_l2": 0.00028, "misfit_rel_diff": 6.7e-07,
        "tolerances": {"traces": 1e-05, "gradient": 0.001, "misfit": 1e-05}, "verified": True, "env": ENV,
    },
    "allreduce_sweep": {
        "schema_version": 2, "kind": "allreduce_sweep", "pattern": "05_nccl_mpi", "variant": "bench", "gpus": 2,
        "ranks": 2, "sizes": [{"bytes": 1 << 20, "count": 262144, "time_s": 2.1e-05, "algbw_GBps": 49.9,
                               "busbw_GBps": 49.9, "wrong": 0}],
        "avg_busbw_GBps": 49.9, "wrong_total": 0, "verified": True, "env": ENV,
    },
    "doctor": {
        "schema_version": 2, "kind": "doctor", "mode": "single-process", "exit_code": 0, "total_seconds": 2.65,
        "facts": {"host": "node1", "gpus": 2}, "checks": {"devices": "PASS", "mpi": "SKIP"}, "env": ENV,
    },
}


def changed(kind, path, value=None, delete=False):
    """A copy of the sample with the field at the dotted path set to value (or deleted)."""
    obj = copy.deepcopy(SAMPLES[kind])
    *parents, last = path.split(".")
    target = obj
    for key in parents:
        target = target[key]
    if delete:
        del target[last]
    else:
        target[last] = value
    return obj


class Validate(unittest.TestCase):
    def assertProblem(self, obj, expected):
        problems = result_schema.validate(obj)
        self.assertTrue(any(expected in p for p in problems), "expected a problem with %r, got %s" % (expected, problems))

    def test_every_sample_is_valid(self):
        for kind, obj in SAMPLES.items():
            self.assertEqual(result_schema.validate(obj), [], kind)

    def test_a_missing_field_is_a_violation(self):
        self.assertProblem(changed("fwi", "verification.misfit_final", delete=True), "verification.misfit_final: missing")
        self.assertProblem(changed("verify", "env", delete=True), "env: missing")
        self.assertProblem(changed("fwi", "env.gpus", delete=True), "env.gpus: missing")

    def test_a_wrong_type_is_a_violation(self):
        self.assertProblem(changed("fwi", "grid", "384x512"), "grid: expected array, got string")
        self.assertProblem(changed("fwi", "gradient_bytes", 786432.5), "gradient_bytes: expected integer, got number")
        self.assertProblem(changed("fwi", "verified", 1), "verified: expected boolean, got integer")
        self.assertProblem(changed("fwi", "reference.speedup", "2.0"), "reference.speedup: expected number, got string")
        self.assertProblem(changed("fwi", "phases_s.combine.median", None), "phases_s.combine.median: expected number")
        self.assertProblem(changed("allreduce_sweep", "sizes", [{"bytes": 1}]), "sizes[0].count: missing")
        self.assertProblem(changed("doctor", "checks.devices", "OK"), "checks.devices: expected one of")
        self.assertProblem(changed("fwi", "env.links", [{"gpus": [0], "link": "NVLink"}]),
                           "env.links[0].gpus: expected 2 elements")
        self.assertProblem(changed("fwi", "env.utc_time", "yesterday"), "env.utc_time: 'yesterday' does not look like")

    def test_a_time_must_be_positive(self):
        self.assertProblem(changed("fwi", "time_per_gradient_s", 0), "time_per_gradient_s: 0 is not a positive time")
        self.assertProblem(changed("fwi", "reference.time_per_gradient_s", -0.5), "-0.5 is not a positive time")
        self.assertProblem(changed("allreduce_sweep", "sizes", [dict(SAMPLES["allreduce_sweep"]["sizes"][0], time_s=0)]),
                           "sizes[0].time_s: 0 is not a positive time")
        self.assertProblem(changed("fwi", "time_per_iteration_s", "1"), "time_per_iteration_s: expected number")

    def test_a_boolean_is_no_number_and_a_float_no_version(self):
        # JSON's true is Python's True, an int: the schema still tells them apart.
        self.assertProblem(changed("fwi", "gpus", True), "gpus: expected integer, got boolean")
        self.assertProblem(changed("fwi", "combine_share", False), "combine_share: expected number, got boolean")
        self.assertProblem(changed("fwi", "schema_version", 2.0), "schema_version: expected one of 2, got 2.0")
        self.assertProblem(changed("fwi", "schema_version", True), "schema_version: expected one of 2")

    def test_patterns_and_lengths_are_whole(self):
        """A string must match its pattern whole, and an array of a fixed length have no more elements either."""
        self.assertProblem(changed("fwi", "env.utc_time", "2025-06-01T08:30:00Z, later"), "env.utc_time:")
        self.assertProblem(changed("fwi", "env.gpus", [dict(ENV["gpus"][0], sm="sm_90 (Hopper)")]), "env.gpus[0].sm:")
        self.assertProblem(changed("fwi", "grid", [384, 512, 1]), "grid: expected 2 elements, got 3")

    def test_an_unknown_top_level_key_is_a_violation_but_not_inside_details_or_env(self):
        self.assertProblem(changed("fwi", "speedup", 2.0), "speedup: not in the schema")
        self.assertProblem(changed("fwi", "verification.extra", 1), "verification.extra: not in the schema")
        self.assertEqual(result_schema.validate(changed("fwi", "details.new_figure", 1.0)), [])
        self.assertEqual(result_schema.validate(changed("fwi", "env.new_fact", "x")), [])

    def test_version_kind_and_nan(self):
        self.assertProblem(changed("fwi", "schema_version", 1), "schema_version: expected one of 2")
        self.assertProblem(changed("fwi", "kind", "fwi2"), "kind: expected one of")
        self.assertProblem(changed("fwi", "time_per_gradient_s", float("nan")), "time_per_gradient_s: nan is not")
        self.assertEqual(result_schema.validate(changed("fwi", "reference", None)), [])

    def test_an_env_without_gpus_is_valid(self):
        env = dict(ENV, gpu_count=0, gpus=[], links=[], driver_version=None, nvidia_driver_version=None,
                   nccl_version=None, mpi_library_version=None, nccl_env={})
        self.assertEqual(result_schema.validate_env(env), [])

    def test_the_env_this_machine_reports_is_valid(self):
        if not VISIBLE_GPUS:
            self.skipTest("no --visible-gpus given")
        output = subprocess.run([VISIBLE_GPUS, "--env-json"], capture_output=True, text=True, timeout=60, check=True)
        env = json.loads(output.stdout)
        self.assertEqual(result_schema.validate_env(env), [], output.stdout)
        self.assertEqual(env["gpu_count"], len(env["gpus"]))


class CommandLine(unittest.TestCase):
    def run_script(self, *args):
        process = subprocess.run([sys.executable, SCRIPT] + list(args), capture_output=True, text=True, timeout=60)
        return process.returncode, process.stdout + process.stderr

    def write(self, directory, name, text):
        path = os.path.join(directory, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_logs_and_json_files(self):
        with tempfile.TemporaryDirectory() as directory:
            good_log = self.write(directory, "good.log", "progress\nRESULT %s\ndone\n" % json.dumps(SAMPLES["fwi"]))
            bad_log = self.write(directory, "bad.log", "line one\nRESULT %s\n" % json.dumps(changed("fwi", "gpus", "2")))
            good_json = self.write(directory, "good.json", json.dumps(SAMPLES["verify"]) + "\n")
            no_result = self.write(directory, "empty.log", "nothing here\n")

            code, output = self.run_script(good_log, good_json)
            self.assertEqual(code, 0, output)
            self.assertIn("good.log: 1 valid (fwi)", output)
            code, output = self.run_script(good_log, bad_log)
            self.assertEqual(code, 1, output)
            self.assertIn("bad.log:2: gpus: expected integer, got string", output)
            code, output = self.run_script(no_result)
            self.assertEqual((code, "no RESULT line" in output), (1, True), output)
            code, output = self.run_script("--kind", "fwi", good_json)
            self.assertEqual((code, 'kind: expected "fwi"' in output), (1, True), output)
            env_file = self.write(directory, "machine.json", json.dumps(ENV))
            self.assertEqual(self.run_script("--env", env_file)[0], 0)
            self.assertEqual(self.run_script(os.path.join(directory, "missing.log"))[0], 2)
            self.assertEqual(self.run_script()[0], 2)
            code, output = self.run_script("--kind", "bogus", good_json)
            self.assertEqual((code, "--kind needs one of" in output), (2, True), output)
            # Bad usage says what is wrong, then the usage lines (not the whole help).
            for args, why in ((["--kind=fwi", good_json], "unknown flag '--kind=fwi'"),
                              (["--kind", "fwi", "--kind", "doctor", good_json], "--kind given twice"),
                              (["--env", "--env", env_file], "--env given twice"),
                              (["--env", "--kind", "fwi", env_file], "--env and --kind do not go together"),
                              ([], "no FILE given")):
                code, output = self.run_script(*args)
                self.assertEqual(code, 2, output)
                self.assertIn("result_schema: " + why, output)
                self.assertIn("usage: python3 scripts/result_schema.py", output)
                self.assertNotIn("From Python", output)

    def test_a_file_that_is_not_an_object(self):
        with tempfile.TemporaryDirectory() as directory:
            for text, name in (("null", "null"), ("[1]", "array"), ('"s"', "string")):
                path = self.write(directory, "r.json", text + "\n")
                code, output = self.run_script("--kind", "fwi", path)
                self.assertEqual(code, 1, output)
                self.assertIn("r.json: RESULT: expected object, got %s" % name, output)
                self.assertNotIn("Traceback", output)

    def test_help(self):
        code, output = self.run_script("--help")
        self.assertEqual(code, 0, output)
        self.assertIn("usage: python3 scripts/result_schema.py", output)


def field_names(spec):
    """Every field name inside a spec, recursively."""
    names = set()
    for attribute in ("spec", "item", "value_spec"):
        if hasattr(spec, attribute):
            names |= field_names(getattr(spec, attribute))
    for name, inner in getattr(spec, "fields", {}).items():
        names |= {name} | field_names(inner)
    return names


class Documentation(unittest.TestCase):
    def test_docs_name_every_field_and_kind(self):
        with open(os.path.join(ROOT, "docs", "RESULT.md")) as f:
            docs = f.read()
        for kind in result_schema.KINDS:
            missing = sorted(name for name in field_names(result_schema.schema_of(kind))
                             if "`%s`" % name not in docs and ".%s`" % name not in docs)  # or `parent.name`
            self.assertEqual(missing, [], "docs/RESULT.md does not name these fields of kind %s" % kind)
            self.assertIn('`"%s"`' % kind, docs)
        self.assertIn("the current version is **%d**" % result_schema.SCHEMA_VERSION, docs)


if __name__ == "__main__":
    if "--visible-gpus" in sys.argv:
        at = sys.argv.index("--visible-gpus")
        VISIBLE_GPUS = sys.argv[at + 1]
        del sys.argv[at:at + 2]
    unittest.main(verbosity=2)
