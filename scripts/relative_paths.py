#!/usr/bin/env python3
"""Makes the paths in recorded results relative, as the docs quote them (the recording machine's paths
are no one's).

usage: relative_paths.py RESULTS_FOLDER REPOSITORY FILE...

In each FILE, rewritten in place, "<folder>/x" becomes "x" and the folder itself, where it ends a word (a
command's last argument, a quoted path), becomes ".". RESULTS_FOLDER is taken first, as it lies inside
the repository. Plain text, not a sed pattern: a path may hold characters a pattern reads as its own.
Exit 2 when a folder is not an absolute path below the root ("" or "/" would rewrite every slash), or a
FILE is not a file that can be read and written (all checked before any file is changed).
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plotting import print_help, replace_atomically  # noqa: E402


def relative_paths(text, folders):
    """text with every path under one of folders (absolute, no trailing slash) made relative."""
    for folder in folders:
        folder = folder.rstrip("/")
        text = re.sub(re.escape(folder) + r"(/|(?=[\s'\"]|$))",
                      lambda match: "" if match.group(1) else ".", text, flags=re.MULTILINE)
    return text


def main(argv):
    if argv in (["-h"], ["--help"]):
        return print_help("relative_paths", __doc__)
    if len(argv) < 3:
        print("relative_paths: " + next(line for line in __doc__.splitlines() if line.startswith("usage:")),
              file=sys.stderr)
        return 2
    folders, files = argv[:2], argv[2:]
    for folder in folders:
        if not folder.startswith("/") or not folder.strip("/"):
            print("relative_paths: folder '%s' is not an absolute path below the root" % folder, file=sys.stderr)
            return 2
    # Every file is checked before any is rewritten.
    for path in files:
        if not os.path.isfile(path) or not os.access(path, os.R_OK | os.W_OK):
            print("relative_paths: '%s' is not a file that can be read and written" % path, file=sys.stderr)
            return 2
    for path in files:
        try:
            with open(path, encoding="utf-8", errors="surrogateescape") as f:
                text = relative_paths(f.read(), folders)

            def write(temporary):
                with open(temporary, "w", encoding="utf-8", errors="surrogateescape") as f:
                    f.write(text)
            replace_atomically(path, write)  # stopped at any moment: the old file or the new, never an empty one
        except OSError as error:
            print("relative_paths: %s: %s" % (path, error.strerror), file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
