#!/usr/bin/env python3
"""Tests of scripts/relative_paths.py, which record-results.sh runs over the results it records: paths
under the results folder or the repository become relative, the folders themselves ".", and nothing
else changes."""
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "relative_paths.py")
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from relative_paths import relative_paths  # noqa: E402

REPO = "/home/a b/fwi[1]|x"  # characters a sed pattern would read as its own
RESULTS = REPO + "/docs/results/4xH100"
FOLDERS = [RESULTS, REPO]


class RelativePaths(unittest.TestCase):
    def test_paths_under_the_folders(self):
        text = "$ %s/build/doctor/doctor --json %s/lessons/doctor.json\n" % (REPO, RESULTS)
        self.assertEqual(relative_paths(text, FOLDERS), "$ build/doctor/doctor --json lessons/doctor.json\n")

    def test_a_folder_that_ends_a_word(self):
        text = 'bash -c source "$1/scripts/common.sh" && configure_and_build default bash %s\n' % REPO
        self.assertEqual(relative_paths(text, FOLDERS),
                         'bash -c source "$1/scripts/common.sh" && configure_and_build default bash .\n')
        self.assertEqual(relative_paths('{"out": "%s"}' % RESULTS, FOLDERS), '{"out": "."}')
        self.assertEqual(relative_paths("cd %s\tthen" % REPO, FOLDERS), "cd .\tthen")

    def test_other_paths_unchanged(self):
        for text in (REPO + "-other/x", REPO + "x/y", "/home/a b/other/x", "relative/path", ""):
            self.assertEqual(relative_paths(text, FOLDERS), text)

    def test_a_trailing_slash_on_a_folder(self):
        self.assertEqual(relative_paths(REPO + "/x " + REPO, [REPO + "/"]), "x .")

    def test_command_line_rewrites_files_in_place(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "run.log")
            with open(path, "w", encoding="utf-8") as f:
                f.write("%s/lessons/a.json and %s/build/b\n" % (RESULTS, REPO))
            subprocess.run([sys.executable, SCRIPT, RESULTS, REPO, path], check=True)
            with open(path, encoding="utf-8") as f:
                self.assertEqual(f.read(), "lessons/a.json and build/b\n")

    def test_command_line_without_files(self):
        result = subprocess.run([sys.executable, SCRIPT, RESULTS], capture_output=True, text=True)
        self.assertEqual(result.returncode, 2)
        self.assertIn("usage", result.stderr)

    def test_command_line_missing_file(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "run.log")
            with open(path, "w", encoding="utf-8") as f:
                f.write(REPO + "/x\n")
            result = subprocess.run([sys.executable, SCRIPT, RESULTS, REPO, path, os.path.join(tmp, "missing.log")],
                                    capture_output=True, text=True)
            self.assertEqual(result.returncode, 2)
            self.assertIn("missing.log' is not a file that can be read and written", result.stderr)
            self.assertNotIn("Traceback", result.stderr)
            with open(path, encoding="utf-8") as f:
                self.assertEqual(f.read(), REPO + "/x\n")  # checked before any file is rewritten

    def test_command_line_refuses_a_folder_that_is_no_absolute_path(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "run.log")
            with open(path, "w", encoding="utf-8") as f:
                f.write(REPO + "/x\n")
            for folders in (["", ""], ["/", REPO], [RESULTS, "relative/path"]):
                result = subprocess.run([sys.executable, SCRIPT] + folders + [path], capture_output=True, text=True)
                self.assertEqual(result.returncode, 2, folders)
                self.assertIn("is not an absolute path below the root", result.stderr)
            with open(path, encoding="utf-8") as f:
                self.assertEqual(f.read(), REPO + "/x\n")  # "" or "/" would have removed every slash

    def test_help(self):
        result = subprocess.run([sys.executable, SCRIPT, "--help"], capture_output=True, text=True)
        self.assertEqual(result.returncode, 0)
        self.assertIn("usage: relative_paths.py", result.stdout)


if __name__ == "__main__":
    unittest.main()
