"""matplotlib for the suite's plotting scripts (06_fwi_shot_parallel/plot_fwi.py, scripts/compare.py),
and the way both write their files (replace_atomically).

Debian and Ubuntu install python3-matplotlib for the system's /usr/bin/python3; a pyenv or venv python3
first on PATH does not see it. import_matplotlib() takes it from the running interpreter if it can, or
else runs the calling script again under /usr/bin/python3 (call it before printing anything). It returns
(numpy, pyplot), or (None, None) when no interpreter has matplotlib: callers then skip their pictures
with a warning, never fail.
"""
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


if __name__ == "__main__":  # a module of the plotting scripts: run alone, it says what it is
    if sys.argv[1:] not in ([], ["-h"], ["--help"]):
        print("plotting: a module of scripts/compare.py and 06_fwi_shot_parallel/plot_fwi.py; it takes no arguments "
              "(--help prints what it does)", file=sys.stderr)
        sys.exit(2)
    print(__doc__)
