"""matplotlib for the suite's plotting scripts (06_fwi_shot_parallel/plot_fwi.py, scripts/compare.py),
the way both write their files (replace_atomically), and how the suite's Python scripts write to standard
output (say, print_help).

Debian and Ubuntu install python3-matplotlib for the system's /usr/bin/python3; a pyenv or venv python3
first on PATH does not see it. import_matplotlib() takes it from the running interpreter if it can, or
else runs the calling script again under /usr/bin/python3 (call it before printing anything). It returns
(numpy, pyplot), or (None, None) when no interpreter has matplotlib: callers then skip their pictures
with a warning, never fail.
"""
import errno
import os
import sys

SYSTEM_PYTHON = "/usr/bin/python3"
MISSING_HINT = "install python3-matplotlib; scripts/common.sh installs it when it sets a machine up"


def import_matplotlib():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import numpy as np

        return np, plt
    except ImportError:
        pass
    running_system_python = os.path.realpath(sys.executable) == os.path.realpath(SYSTEM_PYTHON)
    if os.path.exists(SYSTEM_PYTHON) and not running_system_python and not os.environ.get("FWI_PLOT_REEXEC"):
        os.environ["FWI_PLOT_REEXEC"] = "1"
        if sys.stdout is not None:  # None when started with standard output closed
            sys.stdout.flush()
        os.execv(SYSTEM_PYTHON, [SYSTEM_PYTHON] + sys.argv)
    return None, None


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


def say(text, lost):
    """print(text) on standard output; when it cannot be written (closed, a full disk, a reader that has gone),
    the error goes into the list `lost` instead of ending the script, so that its files are still written, and
    standard output is pointed at /dev/null so that Python's own flush at exit fails no more."""
    try:
        if sys.stdout is None:  # started with standard output closed
            raise OSError(errno.EBADF, "standard output is closed")
        print(text)
        sys.stdout.flush()
    except OSError as error:
        lost.append(error)
        if sys.stdout is not None:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def print_help(name, text):
    """--help: `text` on standard output, and the exit code: 0, or 3 with a message where it cannot be written
    (closed, a full disk), as the suite's programs do. A reader that stopped early (a closed pipe) took what
    it wanted: 0."""
    lost = []
    say(text, lost)
    if lost and not isinstance(lost[0], BrokenPipeError):
        print("%s: environment: --help: cannot write the help text to standard output" % name, file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":  # a module of the plotting scripts: run alone, it says what it is
    if sys.argv[1:] not in ([], ["-h"], ["--help"]):
        print("plotting: a module of scripts/compare.py and 06_fwi_shot_parallel/plot_fwi.py; it takes no arguments "
              "(--help prints what it does)", file=sys.stderr)
        sys.exit(2)
    sys.exit(print_help("plotting", __doc__))
