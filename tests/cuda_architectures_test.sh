#!/bin/bash
# Usage: cuda_architectures_test.sh CMAKE SOURCE_DIR CAPS EXPECTED_TEXT EXPECTED_STATUS
# Configures SOURCE_DIR (ci preset, no tests) with an nvidia-smi that reports the GPUs' compute capabilities
# CAPS (e.g. "9.0 99.0") on PATH before the real one, and checks that the configure exits with
# EXPECTED_STATUS ("ok" or "fails") and prints EXPECTED_TEXT. Nothing is built; no GPU is needed.
set -u
cmake=$1 source_dir=$2 caps=$3 expected_text=$4 expected_status=$5
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/bin"
printf '#!/bin/sh\nprintf "%%s\\n" %s\n' "$caps" > "$work/bin/nvidia-smi"
chmod +x "$work/bin/nvidia-smi"
cd "$source_dir" || exit 1
PATH="$work/bin:$PATH" "$cmake" --preset ci -B "$work/build" -DBUILD_TESTING=OFF > "$work/log" 2>&1
status=$?
if [[ $expected_status == ok && $status -ne 0 ]] || [[ $expected_status == fails && $status -eq 0 ]]; then
    echo "configure exited $status, expected it to be $expected_status:"
    cat "$work/log"
    exit 1
fi
# CMake wraps its messages: compare with the line breaks and indentation as spaces.
if ! tr -s ' \n' ' ' < "$work/log" | grep -qE -- "$expected_text"; then
    echo "configure output lacks /$expected_text/:"
    cat "$work/log"
    exit 1
fi
echo "configure $expected_status, as expected, and says: $expected_text"
