#!/usr/bin/env python3
"""CPU tests of scripts/docs_figures.py, the generator of the docs' figures: on a scratch Markdown file, a
generated block passes --check, the same block with one figure changed by hand fails it, a table of
measured figures outside any block fails it unless it is marked as quoted, and a block naming results
that do not exist is an error (exit 2). Then --check over the repository's own docs: every figure there
is what its stored results make, or quoted.

usage: docs_figures_test.py PATH/TO/scripts/docs_figures.py WORK_DIR
"""
import os
import subprocess
import sys

RESULTS = "docs/results/4xH200-2026-11-22/compare-default"


def fail(message):
    print("FAILED: " + message)
    sys.exit(1)


def run(script, *args):
    process = subprocess.run([sys.executable, script] + list(args), capture_output=True, text=True, timeout=300)
    return process.returncode, process.stdout + process.stderr


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

    code, output = run(script, "--check")
    if code != 0:
        fail("the repository's docs are not what their stored results make:\n" + output)
    print("PASSED")
    return 0


if __name__ == "__main__":
    sys.exit(main())
