#!/usr/bin/env python3
"""The comparison's table: reads the RESULT JSON of every run scripts/compare.sh made and writes one table.

usage: python3 scripts/compare.py DIR

DIR is compare.sh's output folder; DIR/runs/manifest.tsv lists the runs (tab-separated, with a header):
  pattern  variant  gpus  status  json  log
status is the run's exit code, "timeout" or "not-built"; json and log are paths relative to DIR/runs.
Writes DIR/comparison.txt (the table as printed), comparison.md (the same as a Markdown table, to paste),
comparison.csv, comparison.json (with DIR/machine.json, the env of the machine, when compare.sh wrote
it), and comparison.png (speedup and combine share against the GPU count, one line per pattern and
variant; left out with a warning when matplotlib is missing).

Every RESULT is checked against its schema (docs/RESULT.md, scripts/result_schema.py) and only its
fields are read; a RESULT that does not follow the schema shows the first problem as its row's status.
Speedup is against 01_single_gpu's time per gradient measured in the same comparison; efficiency is
speedup / GPUs. The programs' own speedup against the single-GPU reference they run in-process (when
they did: reference.speedup) is kept in the CSV and JSON as speedup_in_run.
"""
import csv
import io
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plotting import MISSING_HINT, import_matplotlib  # noqa: E402
from result_schema import validate, validate_env  # noqa: E402

BASELINE = "01_single_gpu"
EXIT_MEANINGS = {"1": "verification failed", "2": "bad input", "3": "environment"}
COLUMNS = [  # key, heading, format
    ("pattern", "pattern", "{}"),
    ("variant", "variant", "{}"),
    ("gpus", "GPUs", "{}"),
    ("time_per_gradient_ms", "gradient (ms)", "{:.2f}"),
    ("time_per_iteration_ms", "iteration (ms)", "{:.2f}"),
    ("speedup", "speedup vs 01", "{:.2f}"),
    ("efficiency", "efficiency", "{:.0%}"),
    ("grad_rel_diff", "grad rel diff", "{:.1e}"),
    ("combine_share", "combine share", "{:.1%}"),
    ("status", "status", "{}"),
]
EXTRA_FIELDS = ["combine_ms", "speedup_in_run", "verified", "problem", "grid", "shots", "nt", "iterations", "log"]


def read_manifest(runs_dir):
    with open(os.path.join(runs_dir, "manifest.tsv")) as f:
        return list(csv.DictReader(f, delimiter="\t"))


def read_json(path):
    """The object a run wrote with --json (or compare.sh's machine.json), or None when there is none."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


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


def build_rows(runs_dir):
    """One row per run, in manifest order, with speedup and efficiency against 01's run."""
    runs = []
    for entry in read_manifest(runs_dir):
        result = read_json(os.path.join(runs_dir, entry["json"])) if entry["json"] else None
        runs.append((entry, result))
    baseline = next((field(r, "time_per_gradient_s") for e, r in runs
                     if e["pattern"] == BASELINE and e["status"] == "0" and r), None)
    rows = []
    for entry, result in runs:
        row = {key: None for key, _, _ in COLUMNS}
        row.update({key: None for key in EXTRA_FIELDS})
        row.update(pattern=entry["pattern"], variant=entry["variant"], gpus=int(entry["gpus"]),
                   status=status_text(entry["status"], result), log=entry["log"])
        if result is not None:
            gradient_s = field(result, "time_per_gradient_s")
            row.update(time_per_gradient_ms=milliseconds(gradient_s),
                       time_per_iteration_ms=milliseconds(field(result, "time_per_iteration_s")),
                       combine_ms=milliseconds(field(result, "phases_s.combine.median")),
                       combine_share=field(result, "combine_share"),
                       grad_rel_diff=field(result, "verification.grad_rel_diff"),
                       speedup_in_run=field(result, "reference.speedup"), verified=field(result, "verified"),
                       grid=grid_text(field(result, "grid")),
                       **{key: field(result, key) for key in ("problem", "shots", "nt", "iterations")})
            if baseline and isinstance(gradient_s, (int, float)) and gradient_s > 0:
                row["speedup"] = baseline / gradient_s
                row["efficiency"] = row["speedup"] / row["gpus"]
            if entry["status"] == "0" and row["verified"] is False:
                row["status"] = "NOT VERIFIED"
            row["status"] = schema_status(row["status"], validate(result))
        rows.append(row)
    return rows


def cell(row, key, fmt):
    return "-" if row[key] is None or row[key] == "" else fmt.format(row[key])


def format_table(rows):
    cells = [[heading for _, heading, _ in COLUMNS]] + [[cell(r, k, f) for k, _, f in COLUMNS] for r in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(COLUMNS))]
    lines = ["  ".join(text.ljust(widths[i]) if i < 2 or i == len(COLUMNS) - 1 else text.rjust(widths[i]) for i, text in enumerate(line))
             for line in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(line.rstrip() for line in lines)


def format_markdown(rows):
    lines = ["| " + " | ".join(heading for _, heading, _ in COLUMNS) + " |",
             "|" + "|".join(" --- " for _ in COLUMNS) + "|"]
    lines += ["| " + " | ".join(cell(r, k, f) for k, _, f in COLUMNS) + " |" for r in rows]
    return "\n".join(lines)


def replace_atomically(path, write):
    """Calls write(temporary path), then renames it over path: a run stopped at any moment leaves the previous
    whole file or the new one (as the C++ programs' write_file_atomically)."""
    temporary = "%s.tmp.%d" % (path, os.getpid())
    try:
        write(temporary)
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)


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
    writer = csv.DictWriter(text, fieldnames=fields)
    writer.writeheader()
    for row in rows:
        writer.writerow({key: "" if row[key] is None else row[key] for key in fields})
    write_text(path, text.getvalue())


def series(rows):
    """(label, [(gpus, row)]) per pattern and variant, for the chart; 01 (one point) is left out."""
    lines = {}
    for row in rows:
        if row["pattern"] != BASELINE and row["speedup"] is not None:
            label = row["pattern"] + (" " + row["variant"] if row["variant"] else "")
            lines.setdefault(label, []).append((row["gpus"], row))
    return sorted(lines.items())


def draw_chart(plt, path, rows, title):
    lines = series(rows)
    if not lines:
        return False
    most_gpus = max(row["gpus"] for row in rows)
    fig, (speedup_ax, share_ax) = plt.subplots(1, 2, figsize=(13, 5))
    speedup_ax.plot([1, most_gpus], [1, most_gpus], "k--", linewidth=1, label="ideal")
    for label, points in lines:
        gpus = [g for g, _ in points]
        speedup_ax.plot(gpus, [r["speedup"] for _, r in points], marker="o", label=label)
        share_ax.plot(gpus, [100 * (r["combine_share"] or 0) for _, r in points], marker="o", label=label)
    speedup_ax.set(xlabel="GPUs", ylabel="speedup vs 01_single_gpu", title="speedup: " + title)
    share_ax.set(xlabel="GPUs", ylabel="combine share of an iteration (%)", title="time spent combining")
    for ax in (speedup_ax, share_ax):
        ax.set_xticks(range(1, most_gpus + 1))
        ax.grid(True, alpha=0.3)
    speedup_ax.legend(fontsize=8)
    fig.tight_layout()
    replace_atomically(path, lambda temporary: fig.savefig(temporary, dpi=100, format="png"))
    plt.close(fig)
    return True


def main(argv):
    if len(argv) != 2 or not os.path.isfile(os.path.join(argv[1], "runs", "manifest.tsv")):
        print("usage: python3 scripts/compare.py DIR   (DIR: scripts/compare.sh's output, with runs/manifest.tsv)",
              file=sys.stderr)
        return 2
    directory = argv[1]
    _, plt = import_matplotlib()  # first: it may run this script again under another python3
    rows = build_rows(os.path.join(directory, "runs"))
    machine = read_json(os.path.join(directory, "machine.json"))
    if machine is not None and validate_env(machine):
        print("warning: %s/machine.json: %s" % (directory, "; ".join(validate_env(machine))), file=sys.stderr)
    problems = sorted({r["problem"] for r in rows if r["problem"]})
    title = ", ".join(problems) if problems else "no results"
    table = format_table(rows)
    print(table)
    write_text(os.path.join(directory, "comparison.txt"), table + "\n")
    write_text(os.path.join(directory, "comparison.md"), format_markdown(rows) + "\n")
    write_csv(os.path.join(directory, "comparison.csv"), rows)
    write_text(os.path.join(directory, "comparison.json"),
               json.dumps({"problem": title, "machine": machine, "rows": rows}, indent=1) + "\n")
    written = "comparison.txt, .md, .csv, .json"
    if plt is None:
        print("warning: matplotlib is not installed, so no chart (%s)" % MISSING_HINT, file=sys.stderr)
    elif draw_chart(plt, os.path.join(directory, "comparison.png"), rows, title):
        written += ", .png"
    print("wrote %s to %s/" % (written, directory))
    failed = [r for r in rows if r["status"] != "ok"]
    if failed:
        print("%d of %d runs did not finish verified; their logs are in %s/runs/" % (len(failed), len(rows), directory))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
