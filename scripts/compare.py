#!/usr/bin/env python3
"""The comparison's table: reads the RESULT JSON of every run scripts/compare.sh made and writes one table,
each measured row beside what the scaling model (scripts/scaling_model.py) predicts for it.

usage: python3 scripts/compare.py DIR

DIR is compare.sh's output folder; DIR/runs/manifest.tsv lists the runs (tab-separated, with a header):
  role  pattern  variant  gpus  status  json  log
role is "fwi" (a row of the table), "batch" (01_single_gpu with fewer shots: the model's compute) or
"sweep" (an allreduce sweep: the model's combine); status is the run's exit code, "timeout" or
"not-built"; json and log are paths relative to DIR/runs.
Writes DIR/comparison.txt (the table and the model's inputs, as printed), comparison.md (the table as
Markdown, to paste, with the same notes), comparison.csv, comparison.json (with DIR/machine.json, the env
of the machine, when compare.sh wrote it, and failed_inputs where a model input did not finish verified),
and comparison.png (one panel per GPU count: each pattern and variant's
measured speedup beside the predicted one, as horizontal bars, with its combine share; left out with a
warning when matplotlib is missing). A DIR in docs/results, the stored results the docs' figures are made
from, is refused (exit 2): re-tabulate a copy of it.

Every RESULT is checked against its schema (docs/RESULT.md, scripts/result_schema.py) and only its
fields are read; a RESULT that does not follow the schema is not read at all, and its row's status shows
the first problem. A row the model cannot predict (an input missing, a sweep of one size) gets a note
saying why; a machine.json that does not follow the env schema is left out with a warning. Other processes
that compare.sh saw on the runs' GPUs (DIR/runs/gpu-sharing.txt) are a note under the table.
Exit 0 when every run finished verified, 1 when one did not, 2 for a DIR without runs/manifest.tsv or a
manifest that lists no runs, is not UTF-8 or is not compare.sh's, or a DIR in docs/results, 3 when an
output file cannot be written (a folder in its place, a full disk).
Speedup is against 01_single_gpu's time per gradient measured in the same comparison; efficiency is
speedup / GPUs. The programs' own speedup against the single-GPU reference they run in-process (when
they did: reference.speedup) is kept in the CSV and JSON as speedup_in_run.
"""
import csv
import io
import json
import math
import re
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the repository
from plotting import MISSING_HINT, import_matplotlib, print_help, replace_atomically, say  # noqa: E402
from result_schema import validate, validate_env  # noqa: E402
import scaling_model  # noqa: E402

BASELINE = "01_single_gpu"
UNFINISHED = "unfinished"  # in runs/ while compare.sh runs (read_manifest)
ISOLATED = "--isolated"  # the sweeps' flag that times each allreduce alone, as a run times its combine
ROLE_KINDS = {"fwi": "fwi", "batch": "fwi", "sweep": "allreduce_sweep"}  # the RESULT each role of run writes
EXIT_MEANINGS = {"1": "verification failed", "2": "bad input", "3": "environment"}
FAILED_INPUTS = "model inputs that did not finish verified (their rows are not predicted)"


def signed_percent(fraction):
    """+3%, -12%; 0% where it rounds to nothing (not "-0%")."""
    text = "{:+.0%}".format(fraction)
    return "0%" if text in ("+0%", "-0%") else text


COLUMNS = [  # key, heading, how a value is written
    ("pattern", "pattern", str),
    ("variant", "variant", str),
    ("gpus", "GPUs", str),
    ("time_per_gradient_ms", "gradient (ms)", "{:.2f}".format),
    ("predicted_gradient_ms", "predicted (ms)", "{:.2f}".format),
    ("speedup", "speedup vs 01", "{:.2f}".format),
    ("predicted_speedup", "predicted speedup", "{:.2f}".format),
    ("prediction_error", "error", signed_percent),
    ("biggest_loss", "biggest loss (model)", str),
    ("combine_share", "combine share", "{:.1%}".format),
    ("grad_rel_diff", "grad rel diff", "{:.1e}".format),
    ("status", "status", str),
]
EXTRA_FIELDS = ["time_per_iteration_ms", "predicted_iteration_ms", "efficiency", "combine_ms",
                "predicted_combine_ms", "compute_ms", "predicted_compute_ms", "largest_share", "speedup_in_run",
                "verified", "problem", "grid", "shots", "nt", "iterations", "gradient_bytes", "log"]
# A prediction further off than this gets a line under the table saying where the time went instead.
PREDICTION_TOLERANCE = 0.10


class BadManifest(ValueError):
    """A runs folder that is not as compare.sh left it after its last run: a manifest.tsv it did not write
    (edited, or another tool's), a comparison that did not finish, a RESULT file that cannot be read."""


def read_manifest(runs_dir):
    # compare.sh writes it before the first run and removes it after the last: a comparison that was
    # stopped (Ctrl-C, a lost session) would otherwise read as a complete one with fewer rows.
    unfinished = os.path.join(runs_dir, UNFINISHED)
    if os.path.exists(unfinished):
        raise BadManifest("%s: this comparison did not finish (scripts/compare.sh stopped before its last run); "
                          "run it again" % unfinished)
    path = os.path.join(runs_dir, "manifest.tsv")
    if os.path.exists(path) and not os.path.isfile(path):  # a device or a FIFO would be read without end
        raise BadManifest("%s: not a regular file" % path)
    try:
        with open(path, encoding="utf-8", newline="") as f:
            entries = list(csv.DictReader(f, delimiter="\t"))
    except UnicodeDecodeError as error:
        raise BadManifest("%s: not UTF-8 text (byte %d)" % (path, error.start))
    except csv.Error as error:
        raise BadManifest("%s: %s" % (path, error))
    if not entries:
        raise BadManifest("%s lists no runs (a header line and one line per run expected)" % path)
    for line, entry in enumerate(entries, start=2):
        columns = ("role", "pattern", "variant", "gpus", "status", "json", "log")
        missing = [key for key in columns if entry.get(key) is None]
        if missing:
            raise BadManifest("%s line %d: no %s" % (path, line, ", ".join(missing)))
        if None in entry:  # csv.DictReader's key for the values past the header's columns
            raise BadManifest("%s line %d: more columns than the header's %d" % (path, line, len(entry) - 1))
        for key, name_pattern in (("pattern", r"[0-9]{2}_[a-z0-9_]+"), ("variant", r"[A-Za-z0-9_-]*")):
            if not re.fullmatch(name_pattern, entry[key]):
                raise BadManifest("%s line %d: %s %s is not a lesson's %s as compare.sh writes it"
                                  % (path, line, key, ascii(entry[key]), key))
        if not re.fullmatch(r"[0-9]{1,6}", entry["gpus"]) or int(entry["gpus"]) < 1:
            raise BadManifest("%s line %d: gpus '%s' is not a GPU count" % (path, line, entry["gpus"]))
        # What compare.sh writes, and nothing else: a row it would not write (a role no table has, a status
        # that is no exit code, a run listed twice) means the file was changed since.
        if entry["role"] not in ROLE_KINDS:
            raise BadManifest("%s line %d: role %s is none of %s" % (path, line, ascii(entry["role"]),
                                                                   ", ".join(ROLE_KINDS)))
        if not re.fullmatch(r"[0-9]{1,3}|timeout|not-built", entry["status"]):
            raise BadManifest("%s line %d: status %s is not an exit code, timeout or not-built"
                              % (path, line, ascii(entry["status"])))
        for key, suffix in (("json", ".json"), ("log", ".log")):  # a file of runs/, as compare.sh names it
            name = entry[key]
            if name and not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*" + re.escape(suffix), name):
                raise BadManifest("%s line %d: %s %s is not a %s file's name in %s"
                                  % (path, line, key, ascii(name), suffix, runs_dir))
    first_line_of_run = {}
    for line, e in enumerate(entries, start=2):
        run = (e["role"], e["pattern"], e["variant"], e["gpus"])
        if run in first_line_of_run:
            raise BadManifest("%s line %d: the same run as line %d" % (path, line, first_line_of_run[run]))
        first_line_of_run[run] = line
    return entries


def read_json(path):
    """The object a run wrote with --json (or compare.sh's machine.json), or None when there is none (or what
    is there is not a regular file: a device or a FIFO would be read without end). BadManifest when the file
    cannot be read as JSON: the programs write it whole or not at all, so it was changed since."""
    if not os.path.isfile(path):
        return None
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError, RecursionError) as error:  # RecursionError: nested too deep for the parser
        raise BadManifest("%s: cannot be read as JSON (%s), which no run writes" % (path, error))


def command_line(runs_dir, entry):
    """The command of a run, from the first line of its log ("$ command ..."), "" when there is none."""
    path = os.path.join(runs_dir, entry["log"])
    if not entry["log"] or not os.path.isfile(path):
        return ""
    try:
        with open(path, errors="replace") as f:
            line = f.readline(1 << 16).rstrip("\n")
    except OSError:
        return ""
    return line[2:] if line.startswith("$ ") else ""


ALONE, BACK_TO_BACK, UNKNOWN = "timed alone", "back to back", "timing unknown (its log has no command line)"


def sweep_timing(command):
    """How a sweep run with this command line timed its allreduces: ALONE, BACK_TO_BACK or UNKNOWN."""
    if not command:
        return UNKNOWN
    return ALONE if ISOLATED in command.split() else BACK_TO_BACK


def gpu_sharing_note(runs_dir):
    """One line on the other processes compare.sh saw on the runs' GPUs (runs/gpu-sharing.txt), or None."""
    path = os.path.join(runs_dir, "gpu-sharing.txt")
    if not os.path.isfile(path):
        return None
    try:
        with open(path, errors="replace") as f:
            lines = [line.strip() for line in f if line.strip()]
    except OSError:
        return None
    heading = "other processes on the runs' GPUs "
    groups = []  # "before the first run: GPU 0: pid 4242 (python3, 20.0 GiB)", ...
    for line in lines:
        if line.startswith(heading) or not groups:
            groups.append([line[len(heading):] if line.startswith(heading) else line])
        else:
            groups[-1].append(line)
    return ("other processes held the runs' GPUs, so if they computed, the times are slower than on idle GPUs "
            "and vary (runs/gpu-sharing.txt): " + "; ".join(
                group[0] + " " + ", ".join(group[1:]) if len(group) > 1 else group[0] for group in groups))


# What every run of one comparison shares with 01's: its speedup divides 01's time by the run's, and the
# model adds up 01's runs of fewer shots, so a run of another problem or iteration count compares unlike things.
LIKE_01 = ("problem", "grid", "nt", "iterations")


def baseline_result(runs):
    """01's own verified RESULT in this comparison, the one every speedup divides, or None."""
    return next((r for e, r, s in runs if e["role"] == "fwi" and e["pattern"] == BASELINE and s == "ok"), None)


def unlike_runs_note(runs):
    """A note naming the verified runs (rows and the model's 01 runs) whose problem, grid, time steps or
    iteration count differ from 01's own run, or "" (compare.sh runs them all alike; a folder put together by
    hand may not)."""
    baseline = baseline_result(runs)
    if baseline is None:
        return ""
    unlike = []
    for entry, result, status in runs:
        if result is None or status != "ok" or entry["role"] not in ("fwi", "batch") or result is baseline:
            continue
        differences = ["%s %s against %s" % (key, json.dumps(result.get(key)), json.dumps(baseline.get(key)))
                       for key in LIKE_01 if result.get(key) != baseline.get(key)]
        if differences:
            unlike.append("%s %s %s %s GPU(s) (%s): %s" % (entry["role"], entry["pattern"], entry["variant"] or "-",
                                                       entry["gpus"], entry["log"], ", ".join(differences)))
    if not unlike:
        return ""
    return ("runs unlike 01's, so their speedups and the model's figures compare unlike things: " +
            "; ".join(unlike))


def table_notes(directory, rows, inputs, runs):
    """The notes under the table: the rows the model could not predict or missed by more than its tolerance
    (this fills the rows' predicted columns), runs unlike 01's, then the other processes seen on the runs'
    GPUs."""
    notes = add_predictions(rows, inputs)
    for note in (unlike_runs_note(runs), gpu_sharing_note(os.path.join(directory, "runs"))):
        if note:
            notes.append(note)
    return notes


def field(result, path):
    """The value at a dotted path of a RESULT ("reference.speedup"), None when it or a parent is absent or null."""
    value = result
    for key in path.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def status_text(status, result):
    if status == "0":
        return "ok" if result is not None else "ok, but no RESULT"
    if status == "timeout":
        return "TIMEOUT"
    if status == "not-built":
        return "not built"
    return "FAILED (exit %s%s)" % (status, ": " + EXIT_MEANINGS[status] if status in EXIT_MEANINGS else "")


def milliseconds(seconds):
    return 1e3 * seconds if isinstance(seconds, (int, float)) else None


def grid_text(grid):
    return "x".join(map(str, grid)) if isinstance(grid, list) else None


def schema_status(status, problems):
    """The row's status with the first schema problem added; the run's own failure stays first."""
    if not problems:
        return status
    invalid = "invalid RESULT: " + problems[0] + (" (+%d more)" % (len(problems) - 1) if len(problems) > 1 else "")
    return invalid if status == "ok" else status + "; " + invalid


def finite_or_null(value):
    """value with every infinite or NaN number in it made None: JSON has no such numbers (json.dumps would
    write Infinity, which strict readers refuse)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: finite_or_null(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_or_null(item) for item in value]
    return value


def same_program(entry, result):
    """Whether a RESULT is of the manifest entry's program: its pattern, and for an fwi row its variant too
    (a batch's or a sweep's variant in the manifest names the run, not a field of the RESULT)."""
    return result.get("pattern") == entry["pattern"] and (
        entry["role"] != "fwi" or result.get("variant", "") == entry["variant"])


def read_runs(runs_dir):
    """(manifest entry, RESULT or None, status text) of every run, in manifest order. The RESULT is kept only
    when it follows the schema (an fwi row also shows the times of a run that failed), so that every
    field read from it has its type."""
    runs = []
    for entry in read_manifest(runs_dir):
        entry["command"] = command_line(runs_dir, entry)
        result = read_json(os.path.join(runs_dir, entry["json"])) if entry["json"] else None
        status = status_text(entry["status"], result)
        if result is not None and not validate(result) and result["kind"] != ROLE_KINDS.get(entry["role"]):
            status = "RESULT of another kind (%s for a %s run)" % (result["kind"], entry["role"])
            result = None
        elif result is not None and not validate(result) and result["gpus"] != int(entry["gpus"]):
            status = "RESULT of another run (%d GPU(s) for a %s-GPU run)" % (result["gpus"], entry["gpus"])
            result = None
        elif result is not None and not validate(result) and not same_program(entry, result):
            status = "RESULT of another run (%s for a %s run)" % (
                " ".join(filter(None, (result.get("pattern"), result.get("variant")))),
                " ".join(filter(None, (entry["pattern"], entry["variant"]))))
            result = None
        if result is not None:
            if entry["status"] == "0" and field(result, "verified") is False:
                status = "NOT VERIFIED"
            problems = validate(result)
            status = schema_status(status, problems)
            if problems:
                result = None
        runs.append((entry, result if status == "ok" or entry["role"] == "fwi" else None, status))
    return runs


def build_rows(runs):
    """One row per FWI run, in manifest order, with speedup and efficiency against 01's run."""
    baseline = field(baseline_result(runs) or {}, "time_per_gradient_s")
    rows = []
    for entry, result, status in runs:
        if entry["role"] != "fwi":
            continue
        row = {key: None for key, _, _ in COLUMNS}
        row.update({key: None for key in EXTRA_FIELDS})
        row.update(pattern=entry["pattern"], variant=entry["variant"], gpus=int(entry["gpus"]), status=status,
                   log=entry["log"])
        if result is not None:
            gradient_s = field(result, "time_per_gradient_s")
            row.update(time_per_gradient_ms=milliseconds(gradient_s),
                       time_per_iteration_ms=milliseconds(field(result, "time_per_iteration_s")),
                       compute_ms=milliseconds(field(result, "phases_s.compute.max")),
                       combine_ms=milliseconds(field(result, "phases_s.combine.median")),
                       combine_share=field(result, "combine_share"),
                       grad_rel_diff=field(result, "verification.grad_rel_diff"),
                       speedup_in_run=field(result, "reference.speedup"), verified=field(result, "verified"),
                       grid=grid_text(field(result, "grid")),
                       **{key: field(result, key) for key in ("problem", "shots", "nt", "iterations",
                                                              "gradient_bytes")})
            # (A time the schema takes can still be too small to divide by: 5e-324 s, an infinite speedup.)
            positive = isinstance(gradient_s, (int, float)) and gradient_s > 0
            speedup = baseline / gradient_s if baseline and positive else None
            if speedup is not None and math.isfinite(speedup):
                row["speedup"] = speedup
                row["efficiency"] = speedup / row["gpus"]
        rows.append(row)
    return rows


# ---- the scaling model's inputs and predictions ----

class ModelInputs:
    """What the model reads from one comparison: 01's compute phase per shot count (its own run and the
    batch runs), 01's update phase and gradient time, and the verified allreduce sweeps by (program,
    variant, GPUs)."""

    def __init__(self, runs):
        self.compute_of_shots, self.sweeps = {}, {}
        self.sweep_timing = {}  # by the same key: how the sweep timed its allreduces (sweep_timing)
        self.update_s = self.baseline_s = None
        for entry, result, status in runs:
            if result is None or status != "ok":
                continue
            if entry["role"] in ("fwi", "batch") and entry["pattern"] == BASELINE and result["shots"] > 0:
                self.compute_of_shots[result["shots"]] = field(result, "phases_s.compute.median")
                if entry["role"] == "fwi":
                    self.update_s = field(result, "phases_s.update.median")
                    self.baseline_s = field(result, "time_per_gradient_s")
            elif entry["role"] == "sweep":
                key = scaling_model.sweep_key(result) + (result["gpus"],)
                self.sweeps[key] = result
                self.sweep_timing[key] = sweep_timing(entry.get("command", ""))

    def missing_for(self, row):
        """Why this row cannot be predicted ("" when it can)."""
        source = scaling_model.combine_sweep_for(row["pattern"], row["variant"], row["gpus"])
        if source is None:
            return "no combine sweep is known for this pattern"
        if row["shots"] is None or row["gradient_bytes"] is None:
            return "no RESULT"
        if self.update_s is None or row["shots"] not in self.compute_of_shots:
            return "no verified 01_single_gpu run of all %s shots" % row["shots"]
        share = scaling_model.largest_share(row["shots"], row["gpus"])
        if share not in self.compute_of_shots:
            return "no verified 01_single_gpu run of %d shots" % share
        if source + (row["gpus"],) not in self.sweeps:
            return "no verified %s %s sweep on %d GPUs" % (source + (row["gpus"],))
        return ""

    def predict(self, row):
        sweep = self.sweeps[scaling_model.combine_sweep_for(row["pattern"], row["variant"], row["gpus"]) + (row["gpus"],)]
        fit = scaling_model.combine_from_sweep(sweep, row["gradient_bytes"])
        return scaling_model.predict(row["shots"], row["gpus"], self.compute_of_shots, fit["predicted_s"],
                                     self.update_s)


def add_predictions(rows, inputs):
    """Fills the predicted columns of every row but 01's; returns a list of notes: rows the model could
    not predict and rows it missed by more than PREDICTION_TOLERANCE, each with the reason."""
    notes = []
    for row in rows:
        if row["pattern"] == BASELINE or row["time_per_gradient_ms"] is None:
            continue
        label = "%s %s%d GPU(s)" % (row["pattern"], row["variant"] + ", " if row["variant"] else "", row["gpus"])
        missing = inputs.missing_for(row)
        if missing:
            notes.append("%s: not predicted: %s" % (label, missing))
            continue
        try:
            model = inputs.predict(row)
            # The schema keeps a RESULT's times positive, but phases of 0 and a sweep's line through two
            # sizes can still give a model time of none.
            if not model["gradient"] > 0:
                raise ValueError("the model's gradient time is %g s (its inputs measured no time)" % model["gradient"])
            predicted = dict(predicted_speedup=inputs.baseline_s / model["gradient"],
                             prediction_error=row["time_per_gradient_ms"] / (1e3 * model["gradient"]) - 1)
        except (ValueError, ArithmeticError) as error:  # inputs the model cannot use (a sweep of one size, ...)
            notes.append("%s: not predicted: %s" % (label, error))
            continue
        loss_name, loss_s = scaling_model.biggest_loss(model["losses"])
        row.update(predicted_gradient_ms=1e3 * model["gradient"], predicted_iteration_ms=1e3 * model["iteration"],
                   predicted_compute_ms=1e3 * model["compute"], predicted_combine_ms=1e3 * model["combine"],
                   largest_share=model["largest_share"], biggest_loss="%s %.2f ms" % (loss_name, 1e3 * loss_s),
                   **predicted)
        # A run that failed is no measurement to hold the model to (the table shows its status).
        if row["status"] == "ok" and abs(row["prediction_error"]) > PREDICTION_TOLERANCE:
            notes.append("%s: measured %.2f ms, predicted %.2f ms (%+.0f%%): %s" % (
                label, row["time_per_gradient_ms"], row["predicted_gradient_ms"], 100 * row["prediction_error"],
                where_the_time_went(row)))
    return notes


def where_the_time_went(row):
    """The phase whose measured time is furthest from the model's, in words."""
    gaps = [("compute (slowest GPU)", row["compute_ms"], row["predicted_compute_ms"], "01 with the same shots"),
            ("combine", row["combine_ms"], row["predicted_combine_ms"], "its allreduce sweep")]
    gaps = [g for g in gaps if g[1] is not None]
    if not gaps:
        return "the RESULT has no phases"
    name, measured, predicted, source = max(gaps, key=lambda g: abs(g[1] - g[2]))
    # Not the wait phase: that is a median over the GPUs, and those with fewer shots wait for the slowest.
    rest = row["time_per_gradient_ms"] - sum(g[1] for g in gaps)
    return ("its %s took %.2f ms in the run against %.2f ms from %s (the rest of a gradient, beyond the slowest "
            "GPU's compute and the combine: %.2f ms)" % (name, measured, predicted, source, rest))


def describe_inputs(inputs, rows):
    """The model's inputs as printed under the table: compute per shot count, update, and every fit used."""
    lines = ["scaling model (scripts/scaling_model.py): gradient on N GPUs = compute of the largest share of the "
             "shots on one GPU + combine of G bytes (alpha + G/beta, from the pattern's allreduce sweep)"]
    if inputs.compute_of_shots:
        lines.append("  compute on one GPU (01_single_gpu, --nshots): " + ", ".join(
            "%d shot%s %.2f ms (%.2f per shot)" % (k, "" if k == 1 else "s", 1e3 * t, 1e3 * t / k)
            for k, t in sorted(inputs.compute_of_shots.items(), reverse=True)))
    if inputs.update_s is not None:
        lines.append("  update (01_single_gpu, not divided by N): %.3f ms" % (1e3 * inputs.update_s))
    gradient_bytes = next((r["gradient_bytes"] for r in rows if r["gradient_bytes"]), None)
    if gradient_bytes is None:
        return lines
    timings = set(inputs.sweep_timing.values())
    each_line = timings not in (set(), {ALONE}, {BACK_TO_BACK})  # then each sweep's line says how it timed
    if timings == {ALONE}:
        how = "; each allreduce timed alone, as a run times its combine (%s)" % ISOLATED
    elif timings == {BACK_TO_BACK}:
        how = "; batches of allreduces back to back (sweeps without %s)" % ISOLATED
    else:
        how = "; timed as each line says" if each_line else ""
    lines.append("  combine of G = %d B (the gradient), on the line through two sizes of each sweep%s:"
                 % (gradient_bytes, how))
    for key, sweep in sorted(inputs.sweeps.items()):
        program, variant, gpus = key
        timing = ", " + inputs.sweep_timing[key] if each_line else ""
        try:
            fit = scaling_model.combine_from_sweep(sweep, gradient_bytes)
        except ValueError as error:
            lines.append("    %s %s, %d GPU(s): %s" % (program, variant, gpus, error))
            continue
        beta = "%7.2f GB/s" % (fit["beta_Bps"] / 1e9) if math.isfinite(fit["beta_Bps"]) else "  - (flat)"
        lines.append("    %-24s %-10s %d GPU(s): %.3f ms (alpha %8.1f us, beta %s, through %d and %d B%s)" % (
            program, variant, gpus, 1e3 * fit["predicted_s"], 1e6 * fit["alpha_s"], beta, *fit["sizes"], timing))
    return lines


def cell(row, key, write):
    return "-" if row[key] is None or row[key] == "" else write(row[key])


def format_table(rows):
    cells = [[heading for _, heading, _ in COLUMNS]] + [[cell(r, k, f) for k, _, f in COLUMNS] for r in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(COLUMNS))]
    lines = ["  ".join(text.ljust(widths[i]) if i < 2 or i == len(COLUMNS) - 1 else text.rjust(widths[i]) for i, text in enumerate(line))
             for line in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(line.rstrip() for line in lines)


def format_markdown(rows, notes=(), failed_inputs=()):
    """The table, then (as in comparison.txt) its notes and the model inputs that did not finish verified, one
    paragraph each: pasted without them, a row's missed prediction or a GPU shared with another process would
    go unsaid."""
    lines = ["| " + " | ".join(heading for _, heading, _ in COLUMNS) + " |",
             "|" + "|".join(" --- " for _ in COLUMNS) + "|"]
    lines += ["| " + " | ".join(cell(r, k, f) for k, _, f in COLUMNS) + " |" for r in rows]
    paragraphs = list(notes)
    if failed_inputs:
        paragraphs.append(FAILED_INPUTS + ": " + "; ".join(failed_inputs))
    return "\n\n".join(["\n".join(lines)] + paragraphs)


def write_text(path, text):
    def write(temporary):
        with open(temporary, "w", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
    replace_atomically(path, write)


def write_csv(path, rows):
    fields = [key for key, _, _ in COLUMNS] + EXTRA_FIELDS
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=fields, lineterminator="\n")  # as the other files: not \r\n
    writer.writeheader()
    for row in rows:
        writer.writerow({key: "" if row[key] is None else row[key] for key in fields})
    write_text(path, text.getvalue())


def draw_chart(plt, path, rows, title, machine):
    """One panel per GPU count: per pattern and variant, the measured speedup (solid bar) beside the model's
    (hatched), with the ideal, N, as a dotted line; the combine share is written at the end of each bar. A run
    that did not finish verified gets its status in red instead of a measured bar."""
    # A run drawn: one with a speedup, or one that did not finish verified (its status is written instead;
    # one that wrote no RESULT, a timeout say, has no speedup).
    drawn = [r for r in rows if r["pattern"] != BASELINE and (r["speedup"] is not None or r["status"] != "ok")]
    counts = sorted({r["gpus"] for r in drawn})
    if not counts:
        return False

    def bar_label(row):  # "03_host_staged_mpi pinned", "05_nccl_mpi"
        return row["pattern"] + (" " + row["variant"] if row["variant"] else "")

    labels = sorted({bar_label(r) for r in drawn})
    fig, axes = plt.subplots(1, len(counts), figsize=(6.5 * len(counts), 0.45 * len(labels) + 2.2), squeeze=False)
    in_legend = set()

    def legend_label(name):  # each name once, on the first bar drawn of its kind
        if name in in_legend:
            return None
        in_legend.add(name)
        return name

    for ax, gpus in zip(axes[0], counts):
        by_label = {bar_label(r): r for r in rows if r["gpus"] == gpus and r["pattern"] != BASELINE}
        for k, label in enumerate(labels):
            row = by_label.get(label)
            if row is None or (row["speedup"] is None and row["status"] == "ok"):
                continue
            if row["predicted_speedup"] is not None:
                ax.barh(k - 0.2, row["predicted_speedup"], height=0.4, color="white", edgecolor="tab:orange",
                        hatch="//", label=legend_label("predicted"))
            if row["status"] != "ok":
                ax.text(0.02 * gpus, k + 0.2, row["status"], va="center", fontsize=8, color="tab:red")
                continue
            ax.barh(k + 0.2, row["speedup"], height=0.4, color="tab:blue", label=legend_label("measured"))
            ax.text(max(row["speedup"], row["predicted_speedup"] or 0) + 0.02 * gpus, k,
                    "combine %.0f%%" % (100 * (row["combine_share"] or 0)), va="center", fontsize=8)
        ax.axvline(gpus, color="k", linestyle=":", linewidth=1, label="ideal (%d)" % gpus)
        ax.set_ylim(-0.6, len(labels) - 0.4)  # every panel alike, so that its rows stay beside the first's labels
        ax.set_yticks(range(len(labels)))
        ax.set_yticklabels(labels if gpus == counts[0] else [""] * len(labels), fontsize=8)
        ax.set_xlim(0, gpus * 1.35)
        ax.set(xlabel="speedup vs 01_single_gpu", title="%d GPU%s" % (gpus, "s" if gpus > 1 else ""))
        ax.grid(True, axis="x", alpha=0.3)
    legend = {}  # name -> handle, from every panel ("ideal (2)", "ideal (4)": one "ideal")
    for ax in axes[0]:
        for handle, name in zip(*ax.get_legend_handles_labels()):
            legend.setdefault(name.split(" (")[0], handle)
    fig.legend(list(legend.values()), list(legend), loc="lower center", ncol=3, fontsize=8)
    gpu_names = sorted({g["name"] for g in (machine or {}).get("gpus", [])})
    fig.suptitle("problem %s: measured and predicted speedup%s" % (title, " on " + ", ".join(gpu_names) if gpu_names else ""))
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    replace_atomically(path, lambda temporary: fig.savefig(temporary, dpi=100, format="png"))
    plt.close(fig)
    return True


def in_stored_results(directory):
    """Whether DIR is in docs/results, where only a new recording's own folder may be written: the one
    scripts/record-results.sh names in FWI_RECORDING_INTO (compare.sh refuses the same --out)."""
    def inside(path, folder):
        return (os.path.realpath(path) + os.sep).startswith(os.path.realpath(folder) + os.sep)
    recording = os.environ.get("FWI_RECORDING_INTO")
    return inside(directory, os.path.join(ROOT, "docs", "results")) and not (
        recording and inside(directory, recording))


def main(argv):
    lost = []  # errors writing standard output
    if argv[1:] in (["-h"], ["--help"]):
        return print_help("compare", __doc__)
    usage = "usage: python3 scripts/compare.py DIR   (DIR: scripts/compare.sh's output, with runs/manifest.tsv)"
    if len(argv) != 2:
        print(usage, file=sys.stderr)
        return 2
    if not os.path.isfile(os.path.join(argv[1], "runs", "manifest.tsv")):
        why = "no such folder" if not os.path.isdir(argv[1]) else "it has no runs/manifest.tsv"
        print("compare: %s: %s\n%s" % (argv[1], why, usage), file=sys.stderr)
        return 2
    directory = argv[1]
    if in_stored_results(directory):
        print("compare: %s is in docs/results, the stored results the docs' figures are made from, and this would "
              "rewrite its comparison files; to see its table again, run compare.py on a copy (cp -r DIR /tmp/)"
              % directory, file=sys.stderr)
        return 2
    _, plt = import_matplotlib()  # first: it may run this script again under another python3
    try:
        runs = read_runs(os.path.join(directory, "runs"))
    except BadManifest as error:
        print("compare: %s" % error, file=sys.stderr)
        return 2
    rows = build_rows(runs)
    inputs = ModelInputs(runs)
    notes = table_notes(directory, rows, inputs, runs)
    try:
        machine = read_json(os.path.join(directory, "machine.json"))
    except BadManifest as error:
        print("compare: warning: %s; it is left out" % error, file=sys.stderr)
        machine = None
    if machine is not None and validate_env(machine):
        print("compare: warning: %s/machine.json: %s; it is left out" % (directory, "; ".join(validate_env(machine))),
              file=sys.stderr)
        machine = None
    problems = sorted({r["problem"] for r in rows if r["problem"]})
    title = ", ".join(problems) if problems else "no results"
    text = "\n".join([format_table(rows)] + notes + [""] + describe_inputs(inputs, rows))
    failed_inputs = ["%s %s %s, %s GPU(s) (%s): %s" % (e["role"], e["pattern"], e["variant"], e["gpus"], s, e["log"])
                     for e, _, s in runs if e["role"] != "fwi" and s != "ok"]
    if failed_inputs:
        text += "\n" + FAILED_INPUTS + ":\n  " + "\n  ".join(failed_inputs)
    say(text, lost)
    written = "comparison.txt, .md, .csv, .json"
    try:
        write_text(os.path.join(directory, "comparison.txt"), text + "\n")
        write_text(os.path.join(directory, "comparison.md"), format_markdown(rows, notes, failed_inputs) + "\n")
        write_csv(os.path.join(directory, "comparison.csv"), rows)
        write_text(os.path.join(directory, "comparison.json"),
                   json.dumps(finite_or_null(dict({"problem": title, "machine": machine, "rows": rows, "notes": notes,
                                                   "model": {"compute_of_shots_s": inputs.compute_of_shots,
                                                             "update_s": inputs.update_s}},
                                                  **({"failed_inputs": failed_inputs} if failed_inputs else {}))),
                              indent=1, allow_nan=False) + "\n")
        if plt is None:
            print("compare: warning: matplotlib is not installed, so no chart (%s)" % MISSING_HINT, file=sys.stderr)
        elif draw_chart(plt, os.path.join(directory, "comparison.png"), rows, title, machine):
            written += ", .png"
        else:
            print("compare: warning: no multi-GPU run has a speedup or a failure to draw, so no chart",
                  file=sys.stderr)
    except OSError as error:  # a folder in a file's place, a full disk, a read-only folder
        print("compare: error: cannot write the comparison in %s/: %s" % (directory, error), file=sys.stderr)
        return 3
    say("wrote %s to %s/" % (written, directory), lost)
    failed = [r for r in rows if r["status"] != "ok"]
    if failed:
        say("%d of %d runs did not finish verified; their logs are in %s/runs/" % (len(failed), len(rows), directory),
            lost)
    if lost:
        print("compare: environment: standard output could not be written (%s): the table is in %s/comparison.txt"
              % (lost[0].strerror or lost[0], directory), file=sys.stderr)
        return 3
    return 1 if failed or failed_inputs else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
