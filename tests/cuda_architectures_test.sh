#!/bin/bash
# Usage: cuda_architectures_test.sh CMAKE SOURCE_DIR CAPS EXPECTED_TEXT EXPECTED_STATUS [LATER_CAPS [UNEXPECTED_TEXT]]
# Configures SOURCE_DIR (ci preset, no tests) with an nvidia-smi that reports the GPUs' compute capabilities
# CAPS (e.g. "9.0 99.0") on PATH before the real one, and checks that the configure exits with
# EXPECTED_STATUS ("ok" or "fails") and prints EXPECTED_TEXT. With LATER_CAPS, the same build folder is
# configured again with an nvidia-smi that reports those, and that configure is the one checked. With
# UNEXPECTED_TEXT, the checked configure must not print it. Nothing is built; no GPU is needed.
set -u
cmake=$1 source_dir=$2 caps=$3 expected_text=$4 expected_status=$5 later_caps=${6:-} unexpected_text=${7:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/bin"
report_caps() { printf '#!/bin/sh\nprintf "%%s\\n" %s\n' "$1" > "$work/bin/nvidia-smi"; chmod +x "$work/bin/nvidia-smi"; }
report_caps "$caps"
cd "$source_dir" || exit 1
# Without the caller's CUDAARCHS, which would skip the choice from the GPUs present.
env -u CUDAARCHS PATH="$work/bin:$PATH" "$cmake" --preset ci -B "$work/build" -DBUILD_TESTING=OFF > "$work/log" 2>&1
status=$?
if [ -n "$later_caps" ]; then
    [ $status -eq 0 ] || { echo "the first configure failed:"; cat "$work/log"; exit 1; }
    report_caps "$later_caps"
    env -u CUDAARCHS PATH="$work/bin:$PATH" "$cmake" "$work/build" > "$work/log" 2>&1
    status=$?
fi
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
if [ -n "$unexpected_text" ] && tr -s ' \n' ' ' < "$work/log" | grep -qE -- "$unexpected_text"; then
    echo "configure output says /$unexpected_text/, which it should not:"
    cat "$work/log"
    exit 1
fi
echo "configure $expected_status, as expected, and says: $expected_text"
