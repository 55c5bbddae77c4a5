#!/usr/bin/env python3
"""The schema of the RESULT lines every program prints (docs/RESULT.md), as data, and a check against it.

usage: python3 scripts/result_schema.py [--kind KIND] FILE...
       python3 scripts/result_schema.py --env FILE...
       python3 scripts/result_schema.py --help

Each FILE is a program's output (every line holding `RESULT {json}` is checked) or the file its --json
flag wrote (one object). With --kind every RESULT must also be of that kind; with --env each FILE holds one
env object alone (visible_gpus --env-json, scripts/compare.sh's machine.json).
Prints each violation as FILE[:LINE]: FIELD: problem and exits 1 when there is any (a FILE without a RESULT
is one), 0 when all is valid, 2 for bad usage or a file that cannot be read.

From Python: validate(obj) returns the problems of one RESULT object as a list of strings (empty: valid);
validate_env(obj) those of an env object. Plain python3, nothing to install.
"""
import errno
import json
import math
import os
import re
import sys

SCHEMA_VERSION = 2
MAX_FILE_BYTES = 256 << 20  # read_results reads a file whole


# ---- The vocabulary of the schema ----

class Type:
    """A JSON type: "integer", "number", "string", "boolean" or "object" (any object, not checked inside)."""

    def __init__(self, name):
        self.name = name

    def problems(self, value, path):
        if self.name == "number" and isinstance(value, float) and not math.isfinite(value):
            return ["%s: %s is not a JSON number (the writer turns NaN and infinities into null)" % (path, value)]
        if self.name in ("number", "integer") and isinstance(value, int) and abs(value) > 2 ** 63:
            return ["%s: %s is beyond any count or measurement the programs write" % (path, _describe(value))]
        return [] if _is(self.name, value) else ["%s: expected %s, got %s" % (path, self.name, _describe(value))]


class Positive:
    """A number above zero: a time measured (a run that took no time measured nothing)."""

    def problems(self, value, path):
        problems = NUM.problems(value, path)
        if problems:
            return problems
        return [] if value > 0 else ["%s: %s is not a positive time" % (path, json.dumps(value))]


class Nullable:
    """The type, or null."""

    def __init__(self, spec):
        self.spec = spec

    def problems(self, value, path):
        return [] if value is None else self.spec.problems(value, path)


class Matches:
    """A string matching a regular expression."""

    def __init__(self, pattern, example):
        self.pattern, self.example = re.compile(pattern), example

    def problems(self, value, path):
        if not isinstance(value, str):
            return ["%s: expected string, got %s" % (path, _describe(value))]
        return [] if self.pattern.fullmatch(value) else ["%s: %r does not look like %r" % (path, value, self.example)]


class OneOf:
    """One of a few values (strings or numbers)."""

    def __init__(self, *values):
        self.values = values

    def problems(self, value, path):
        if any(value == v and type(value) is type(v) for v in self.values):
            return []
        return ["%s: expected one of %s, got %s" % (path, ", ".join(json.dumps(v) for v in self.values),
                                                    json.dumps(value))]


class ArrayOf:
    """An array of one type of element, of a given length when `length` is set."""

    def __init__(self, item, length=None):
        self.item, self.length = item, length

    def problems(self, value, path):
        if not isinstance(value, list):
            return ["%s: expected array, got %s" % (path, _describe(value))]
        if self.length is not None and len(value) != self.length:
            return ["%s: expected %d elements, got %d" % (path, self.length, len(value))]
        return [problem for i, item in enumerate(value) for problem in self.item.problems(item, "%s[%d]" % (path, i))]


class MapOf:
    """An object whose keys are free and whose values all have one type."""

    def __init__(self, value_spec):
        self.value_spec = value_spec

    def problems(self, value, path):
        if not isinstance(value, dict):
            return ["%s: expected object, got %s" % (path, _describe(value))]
        return [problem for key, item in value.items() for problem in self.value_spec.problems(item, path + "." + key)]


class Fields:
    """An object with these fields, all required; other keys are violations unless extra_keys is set."""

    def __init__(self, fields, extra_keys=False):
        self.fields, self.extra_keys = fields, extra_keys

    def problems(self, value, path):
        if not isinstance(value, dict):
            return ["%s: expected object, got %s" % (path or "RESULT", _describe(value))]
        prefix = path + "." if path else ""
        problems = []
        for key, spec in self.fields.items():
            if key not in value:
                problems.append("%s%s: missing" % (prefix, key))
            else:
                problems += spec.problems(value[key], prefix + key)
        if not self.extra_keys:
            problems += ["%s%s: not in the schema (add it to docs/RESULT.md and scripts/result_schema.py, or move it "
                         "into details)" % (prefix, key) for key in value if key not in self.fields]
        return problems


def _is(name, value):
    if name == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if name == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, {"string": str, "boolean": bool, "object": dict}[name])


def _describe(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    return {int: "integer", float: "number", str: "string", list: "array", dict: "object"}.get(type(value), "?")


INT, NUM, STR, BOOL, OBJECT = Type("integer"), Type("number"), Type("string"), Type("boolean"), Type("object")
SECONDS = Positive()

# ---- The schema (docs/RESULT.md describes every field) ----

ENV = Fields({
    "hostname": STR,
    "utc_time": Matches(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", "2025-01-31T12:00:00Z"),
    "git_commit": STR,
    "build_type": STR,
    "cuda_architectures": STR,
    "gpu_count": INT,
    "gpus": ArrayOf(Fields({
        "index": INT,
        "name": STR,
        "pci_bus_id": STR,
        "memory_bytes": INT,
        "sm": Matches(r"sm_\d+", "sm_90"),
    })),
    "driver_version": Nullable(STR),
    "nvidia_driver_version": Nullable(STR),
    "cuda_runtime_version": STR,
    "links": ArrayOf(Fields({"gpus": ArrayOf(INT, length=2), "link": OneOf("NVLink", "PCIe", "none", "unknown")})),
    "nccl_version": Nullable(STR),
    "mpi_library_version": Nullable(STR),
    "nccl_env": MapOf(STR),
}, extra_keys=True)

SPREAD = Fields({"min": NUM, "median": NUM, "max": NUM})

# Fields of every kind, before and after the kind's own.
FIRST = {"schema_version": OneOf(SCHEMA_VERSION)}
LAST = {"env": ENV}

KINDS = {
    "fwi": {
        "pattern": STR,
        "variant": STR,
        "gpus": INT,
        "ranks": INT,
        "problem": STR,
        "grid": ArrayOf(INT, length=2),
        "shots": INT,
        "nt": INT,
        "iterations": INT,
        "first_iteration": INT,
        "time_per_gradient_s": SECONDS,
        "time_per_iteration_s": SECONDS,
        "phases_s": Fields({"compute": SPREAD, "wait": SPREAD, "combine": SPREAD, "update": SPREAD}),
        "combine_share": NUM,
        "gradient_bytes": INT,
        "reference": Nullable(Fields({"time_per_gradient_s": SECONDS, "speedup": NUM, "efficiency": NUM})),
        "verification": Fields({
            "grad_rel_diff": Nullable(NUM),
            "misfit_rel_diff": Nullable(NUM),
            "model_rel_diff": Nullable(NUM),
            "models_identical": BOOL,
            "misfit_first": Nullable(NUM),
            "misfit_final": Nullable(NUM),
            "tolerances": Fields({"gradient": NUM, "misfit": NUM, "model": NUM}),
        }),
        "details": OBJECT,
        "verified": BOOL,
    },
    "verify": {
        "pattern": STR,
        "variant": OneOf("verify"),
        "problem": STR,
        "grid": ArrayOf(INT, length=2),
        "traces_rel_l2": Nullable(NUM),
        "gradient_rel_l2": Nullable(NUM),
        "misfit_rel_diff": Nullable(NUM),
        "tolerances": Fields({"traces": NUM, "gradient": NUM, "misfit": NUM}),
        "verified": BOOL,
    },
    "allreduce_sweep": {
        "pattern": STR,
        "variant": STR,
        "gpus": INT,
        "ranks": INT,
        "sizes": ArrayOf(Fields({
            "bytes": INT,
            "count": INT,
            "time_s": SECONDS,
            "algbw_GBps": NUM,
            "busbw_GBps": NUM,
            "wrong": INT,
        })),
        "avg_busbw_GBps": NUM,
        "wrong_total": INT,
        "verified": BOOL,
    },
    "doctor": {
        "mode": OneOf("single-process", "mpi"),
        "exit_code": INT,
        "total_seconds": NUM,
        "facts": OBJECT,
        "checks": MapOf(OneOf("PASS", "WARN", "FAIL", "SKIP")),
    },
}


def schema_of(kind):
    """The Fields of a RESULT of this kind, schema_version first and env last, as emit_result writes them."""
    return Fields(dict(FIRST, kind=OneOf(kind), **KINDS[kind], **LAST))


def validate(obj):
    """The problems of one RESULT object, as readable strings; empty when it follows the schema."""
    if not isinstance(obj, dict):
        return ["RESULT: expected object, got %s" % _describe(obj)]
    if not isinstance(obj.get("kind"), str) or obj["kind"] not in KINDS:
        return ["kind: expected one of %s, got %s" % (", ".join(map(json.dumps, KINDS)), json.dumps(obj.get("kind")))]
    return schema_of(obj["kind"]).problems(obj, "")


def validate_env(obj):
    """The problems of an env object alone."""
    return ENV.problems(obj, "env")


# ---- Reading RESULT lines ----

def read_results(path, single_object):
    """[(where, object or None, problem or None)] for every RESULT in the file: the whole file when it is one
    JSON object (a --json file; always when single_object), else every line holding `RESULT {`. OSError for
    what is not a regular file (a device or a FIFO would be read without end)."""
    if not os.path.exists(path):
        raise OSError(errno.ENOENT, "no such file")
    if not os.path.isfile(path):
        raise OSError(errno.EINVAL, "not a regular file")
    if os.path.getsize(path) > MAX_FILE_BYTES:
        raise OSError(errno.EFBIG, "larger than %d MiB, more than any RESULT file or log" % (MAX_FILE_BYTES >> 20))
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    try:
        return [(path, json.loads(text), None)]
    except (ValueError, RecursionError) as error:  # RecursionError: nested too deep for the parser
        if single_object or text.lstrip().startswith("{"):
            return [(path, None, "not a JSON object: %s" % error)]
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        at = line.find("RESULT {")
        if at < 0:
            continue
        where = "%s:%d" % (path, number)
        try:
            found.append((where, json.loads(line[at + len("RESULT "):]), None))
        except (ValueError, RecursionError) as error:
            found.append((where, None, "RESULT line is not JSON: %s" % error))
    return found or [(path, None, "no RESULT line")]


def main(argv):
    args = argv[1:]
    if args in (["-h"], ["--help"]):
        from plotting import print_help  # run as a script: scripts/ is on the path
        return print_help("result_schema", __doc__)
    twice = next((f for f in ("--env", "--kind") if args.count(f) > 1), None)
    env_only = "--env" in args
    kind = None
    if "--kind" in args:
        at = args.index("--kind")
        if at + 1 >= len(args) or args[at + 1] not in KINDS:
            print("result_schema: --kind needs one of %s" % ", ".join(KINDS), file=sys.stderr)
            return 2
        kind = args[at + 1]
        del args[at:at + 2]
    files = [a for a in args if a != "--env"]
    flag = next((f for f in files if f.startswith("-")), None)
    why = ""
    if twice:
        why = "%s given twice" % twice
    elif flag:
        why = "unknown flag '%s'" % flag
    elif env_only and kind:
        why = "--env and --kind do not go together"
    elif not files:
        why = "no FILE given"
    if why:
        usage = __doc__[__doc__.index("usage:"):__doc__.index("\n\n", __doc__.index("usage:"))]
        print("result_schema: %s\n%s" % (why, usage), file=sys.stderr)
        return 2
    violations = 0
    for path in files:
        try:
            results = read_results(path, env_only)
        except OSError as error:
            print("result_schema: cannot read %s: %s" % (path, error.strerror), file=sys.stderr)
            return 2
        problems = []
        for where, obj, problem in results:
            if problem:
                problems.append("%s: %s" % (where, problem))
                continue
            if kind and isinstance(obj, dict) and obj.get("kind") != kind:  # not an object: validate says so
                problems.append("%s: kind: expected %s, got %s" % (where, json.dumps(kind), json.dumps(obj.get("kind"))))
            problems += ["%s: %s" % (where, text) for text in (validate_env(obj) if env_only else validate(obj))]
        for text in problems:
            print(text)
        if not problems:
            what = "env" if env_only else ", ".join(sorted({obj["kind"] for _, obj, _ in results}))
            print("%s: %d valid (%s)" % (path, len(results), what))
        violations += len(problems)
    if violations:
        print("result_schema: %d violation(s) of schema version %d (docs/RESULT.md)" % (violations, SCHEMA_VERSION))
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
