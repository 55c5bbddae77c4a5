#!/usr/bin/env python3
"""CPU tests of scripts/docs_figures.py, the generator of the docs' figures: on a scratch Markdown file, a
generated block passes --check, the same block with one figure changed by hand fails it, a table of
measured figures outside any block fails it unless it is marked as quoted, and a block naming results
that do not exist is an error (exit 2). Then --check over the repository's own docs: every figure there
is what its stored results make, or quoted. Results a generator cannot use are an error (exit 2) that
names the problem, not a traceback.

usage: docs_figures_test.py PATH/TO/scripts/docs_figures.py WORK_DIR
"""
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = "docs/results/4xH200-2026-11-22/compare-default"


def fail(message):
    print("FAILED: " + message)
    sys.exit(1)


def run(script, *args):
    process = subprocess.run([sys.executable, script] + list(args), capture_output=True, text=True, timeout=300)
    return process.returncode, process.stdout + process.stderr


def check_bad_results(script, work, page):
    """Results a generator cannot use are an error naming the problem (exit 2), never a traceback: a JSON
    list where a RESULT should be, NaN, a RESULT of another kind, a generator given too few words, a value
    of the wrong type, a damaged timings.tsv, a comparison whose times are all 0."""
    def write(path, text):
        with open(path, "w") as f:
            f.write(text)
    write(os.path.join(work, "list.json"), "[1]\n")
    write(os.path.join(work, "list.log"), "$ program\noutput\n")
    sweep = os.path.join(ROOT, "docs/results/4xH100-2026-11-26/compare-default/runs/sweep-05_nccl_mpi-nccl-4gpu")
    with open(sweep + ".json") as f:
        write(os.path.join(work, "nan.json"), f.read().replace('"time_s": ', '"time_s": NaN, "x": ', 1))
    write(os.path.join(work, "timings.tsv"), "step\tseconds\texit\tcommand\nbuild\t12\n")  # no command
    huge = os.path.join(work, "huge")  # a field longer than Python's csv module takes
    os.makedirs(huge, exist_ok=True)
    write(os.path.join(huge, "timings.tsv"), "step\tseconds\texit\tcommand\n" + "x" * 200000 + "\t1\t0\tc\n")
    zero = os.path.join(work, "zero")
    shutil.rmtree(zero, ignore_errors=True)
    shutil.copytree(os.path.join(ROOT, RESULTS), zero)
    for name in os.listdir(os.path.join(zero, "runs")):
        if name.endswith(".json"):
            path = os.path.join(zero, "runs", name)
            with open(path) as f:
                text = f.read()
            write(path, re.sub(r'"(time_s|time_per_gradient_s|min|median|max)": [0-9.e+-]+', r'"\1": 0', text))
    cases = [("sweep %s/list" % work, "RESULT: expected object, got array"),
             ("details %s/list" % work, "RESULT: expected object, got array"),
             ("log %s/list" % work, "list.json: expected a JSON object"),
             ("sweep %s/nan" % work, "NaN is not a JSON number"),
             ("details %s" % sweep, "kind: expected fwi, got allreduce_sweep"),
             ("sweep", "'sweep': wrong number of arguments"),
             ("timings %s" % work, "TypeError"),
             ("timings %s" % huge, "field larger than field limit"),
             ("comparison %s" % zero, None), ("model %s" % zero, None)]
    for spec, expected in cases:
        write(page, "<!-- figure: %s -->\n<!-- end figure -->\n" % spec)
        code, output = run(script, page)
        if "Traceback" in output or code != (0 if expected is None else 2) or expected and expected not in output:
            fail("figure '%s': exit %d, expected %s:\n%s" % (spec, code, expected or "0", output))


def check_failed_run_shown(script, work, page):
    """A run that did not finish verified shows its status in the speedups figure, not its speedup, and is
    no example of the model."""
    failed = os.path.join(work, "failed")
    shutil.rmtree(failed, ignore_errors=True)
    shutil.copytree(os.path.join(ROOT, RESULTS), failed)
    manifest = os.path.join(failed, "runs", "manifest.tsv")
    with open(manifest) as f:
        text = f.read()
    with open(manifest, "w") as f:
        f.write(text.replace("fwi\t05_nccl_mpi\t\t2\t0\t", "fwi\t05_nccl_mpi\t\t2\t1\t"))
    with open(page, "w") as f:
        f.write("<!-- figure: speedups %s -->\n<!-- end figure -->\n" % failed)
    code, output = run(script, page)
    row = next((line for line in open(page).read().splitlines() if line.startswith("| 05_nccl_mpi |")), "")
    if code != 0 or "| FAILED (exit 1: verification failed) |" not in row:
        fail("a failed run in the speedups figure: exit %d, its row '%s'\n%s" % (code, row, output))
    with open(page, "w") as f:
        f.write("<!-- figure: example %s 05_nccl_mpi - 2 -->\n<!-- end figure -->\n" % failed)
    code, output = run(script, page)
    if code != 2 or "did not finish verified" not in output:
        fail("a failed run as the model's example: exit %d, expected 2 saying so:\n%s" % (code, output))


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    script, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    page = os.path.join(work, "page.md")

    with open(page, "w") as f:
        f.write("# a page\n\n<!-- figure: comparison %s -->\n<!-- end figure -->\n" % RESULTS)
    code, output = run(script, page)
    if code != 0 or "| 05_nccl_mpi | - | 2 |" not in open(page).read():
        fail("generating a comparison block: exit %d\n%s" % (code, output))
    code, output = run(script, "--check", page)
    if code != 0:
        fail("a freshly generated block fails --check:\n" + output)

    text = open(page).read()
    row = next(line for line in text.splitlines() if line.startswith("| 05_nccl_mpi | - | 2 |"))
    cells = row.split(" | ")
    cells[3] = "%.2f" % (float(cells[3]) * 0.9)  # the time per gradient, 10% better by hand
    with open(page, "w") as f:
        f.write(text.replace(row, " | ".join(cells)))
    code, output = run(script, "--check", page)
    if code != 1 or "differs from its results" not in output:
        fail("a figure changed by hand passes --check (exit %d):\n%s" % (code, output))

    table = "| run | time (ms) |\n| --- | --- |\n| fast | 1.23 |\n"
    with open(page, "w") as f:
        f.write(text + "\n" + table)
    code, output = run(script, "--check", page)
    if code != 1 or "outside a figure or quoted block" not in output:
        fail("an unmarked table of measured figures passes --check (exit %d):\n%s" % (code, output))
    with open(page, "w") as f:
        f.write(text + "\n<!-- quoted: a test, no machine -->\n" + table + "<!-- end quoted -->\n")
    code, output = run(script, "--check", page)
    if code != 0:
        fail("a quoted table fails --check:\n" + output)

    with open(page, "w") as f:
        f.write("<!-- figure: comparison docs/results/no-such-machine/compare-default -->\n<!-- end figure -->\n")
    code, output = run(script, "--check", page)
    if code != 2 or "does not exist" not in output:
        fail("a block naming missing results: exit %d, expected 2 saying so:\n%s" % (code, output))

    # Program output pasted into a code block, outside any block, fails --check as a table does.
    with open(page, "w") as f:
        f.write("# a page\n\n```\nRESULT {\"time_per_gradient_s\": 0.0123}\n```\n")
    code, output = run(script, "--check", page)
    if code != 1 or "line 3: a measured-looking figure outside a figure or quoted block" not in output:
        fail("a RESULT line pasted into a code block passes --check (exit %d):\n%s" % (code, output))
    # A chart block whose picture in docs/figures is another comparison's: --check names the picture.
    with open(page, "w") as f:
        f.write("<!-- figure: chart %s comparison-default-4xH100 -->\n<!-- end figure -->\n" % RESULTS)
    code, output = run(script, "--check", page)
    if code != 1 or "differs from its results: chart docs/figures/comparison-default-4xH100.png" not in output:
        fail("a chart whose picture is another comparison's passes --check (exit %d):\n%s" % (code, output))
    # A timings block naming a step its results do not hold is an error, not a shorter table.
    with open(page, "w") as f:
        f.write("<!-- figure: timings docs/results/4xH100-2026-11-27-comm compare-comm no-such-step -->\n"
                "<!-- end figure -->\n")
    code, output = run(script, "--check", page)
    if code != 2 or "timings.tsv lacks ['no-such-step']" not in output:
        fail("a timings block naming a missing step: exit %d, expected 2 saying so:\n%s" % (code, output))

    # A block that never ends, or a marker that only looks like one, is an error (exit 2), and the page is
    # left as it was: regenerating would otherwise replace the prose up to the next block's end.
    opening = "<!-- figure: comparison %s -->\n" % RESULTS
    for text, expected in [(opening + "prose\n" + opening + "<!-- end figure -->\n",
                            "line 3: a figure block opens before the one of line 1 ends"),
                           (opening + "prose\n", "line 1: the figure block never ends"),
                           ("prose\n<!-- end figure -->\n", "line 2: <!-- end figure --> without a figure block"),
                           ("<!--  figure: comparison %s -->\n<!-- end figure -->\n" % RESULTS,
                            "line 1: a malformed figure marker")]:
        with open(page, "w") as f:
            f.write(text)
        code, output = run(script, page)
        if code != 2 or expected not in output or open(page).read() != text:
            fail("markers %r: exit %d, expected 2 saying '%s' and the page unchanged:\n%s"
                 % (text, code, expected, output))

    # A page with CRLF line endings (a checkout made on Windows) keeps them when its blocks are regenerated.
    with open(page, "w", newline="") as f:
        f.write("# a page\r\n\r\n<!-- figure: comparison %s -->\r\n<!-- end figure -->\r\n" % RESULTS)
    code, output = run(script, page)
    written = open(page, "rb").read()
    if code != 0 or b"| 05_nccl_mpi | - | 2 |" not in written or written.count(b"\n") != written.count(b"\r\n"):
        fail("regenerating a CRLF page: exit %d, or LF line endings written into it:\n%s" % (code, output))
    code, output = run(script, "--check", page)
    if code != 0:
        fail("a regenerated CRLF page fails --check:\n" + output)

    # A flag given twice is refused, as by the suite's other programs.
    code, output = run(script, "--check", "--check", page)
    if code != 2 or "--check given twice" not in output:
        fail("--check given twice: exit %d, expected 2 saying so:\n%s" % (code, output))

    check_bad_results(script, work, page)
    check_failed_run_shown(script, work, page)

    code, output = run(script, "--check")
    if code != 0:
        fail("the repository's docs are not what their stored results make:\n" + output)
    print("PASSED")
    return 0


if __name__ == "__main__":
    sys.exit(main())
