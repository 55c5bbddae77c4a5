#!/usr/bin/env bash
# Lays out the suite's C++ and CUDA files (.cpp, .hpp, .cu, .cuh) in the style of .clang-format, or,
# with --check, lists the files that do not follow it and changes nothing.
#
# usage: scripts/format.sh [--check]
# Needs clang-format 14 (clang-format-14, or a clang-format of major version 14): other versions lay
# some constructs out differently, so their layout is not the style's. On Debian or Ubuntu:
# apt-get install clang-format-14.
# Exit codes: 0 every file follows the style (or now does); 1 with --check, files that do not (listed);
# 2 bad arguments; 3 no clang-format 14 found, or standard output cannot be written.
set -euo pipefail
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/common.sh" || exit 3
trap '' PIPE  # a reader that has gone makes a write fail (say), not a silent death

# Prints its arguments, a line each; exit 3 when standard output cannot take them.
say() { printf '%s\n' "$@" 2>/dev/null || { echo "format: cannot write to standard output" >&2; exit 3; }; }

check=false
for arg in "$@"; do
    case "$arg" in
        -h|--help) say "$(print_help "${BASH_SOURCE[0]}")"; exit 0 ;;
        --check) first_time "$arg" || { echo "format: --check given twice" >&2; exit 2; }; check=true ;;
        *) echo "format: unknown argument $(printf %q "${arg:0:80}") (scripts/format.sh --help)" >&2; exit 2 ;;
    esac
done

if ! clang_format="$(clang_format_14)"; then
    echo "format: no clang-format 14 on PATH (found: $(clang-format --version 2>/dev/null || echo none));" \
         "install clang-format-14" >&2
    exit 3
fi

cd "$ROOT"
# The files git tracks; in a copy that git does not track as this repository (no git, the suite untracked
# inside another repository, a fresh `git init`), the same kinds of file outside build folders.
files=()
if [ "$(git rev-parse --show-toplevel 2>/dev/null)" = "$(pwd -P)" ]; then
    # NUL-separated and unquoted: git would quote a name with other than ASCII letters in it.
    mapfile -d '' -t files < <(git -c core.quotePath=false ls-files -z '*.cpp' '*.hpp' '*.cu' '*.cuh')
fi
if [ ${#files[@]} -eq 0 ]; then
    mapfile -t files < <(find . -path './build*' -prune -o -path ./out -prune -o \
                              \( -name '*.cpp' -o -name '*.hpp' -o -name '*.cu' -o -name '*.cuh' \) -print | sort)
fi

if [ ${#files[@]} -eq 0 ]; then  # a check of nothing would pass
    echo "format: no .cpp, .hpp, .cu or .cuh file found under $ROOT" >&2
    exit 3
fi
if ! $check; then
    "$clang_format" -i --style=file "${files[@]}"
    say "format: ${#files[@]} files laid out with $clang_format"
    exit 0
fi
unformatted=()
for file in "${files[@]}"; do
    "$clang_format" --style=file --dry-run --Werror "$file" >/dev/null 2>&1 || unformatted+=("$file")
done
if [ ${#unformatted[@]} -gt 0 ]; then
    say "format: ${#unformatted[@]} of ${#files[@]} files do not follow .clang-format (scripts/format.sh lays them out):" \
        "${unformatted[@]/#/  }"
    exit 1
fi
say "format: all ${#files[@]} files follow .clang-format ($clang_format)"
