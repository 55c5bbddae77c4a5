#!/usr/bin/env bash
# Usage: sweep_too_large.sh PERCENT TEXT COMMAND [ARG...]
# Runs COMMAND -b S -e S, an allreduce sweep of one size S: PERCENT% of GPU 0's memory, which a few of the
# sweep's buffers cannot fit. Passes when COMMAND refuses it with exit 2 and TEXT in its output. Skipped
# (77) where S would be past the sweeps' 64 GiB limit (a GPU larger than the test was written for).
set -u
if [ $# -lt 3 ] || ! [[ "$1" =~ ^[1-9][0-9]?$ ]]; then
    echo "sweep_too_large: usage: sweep_too_large.sh PERCENT TEXT COMMAND [ARG...] (PERCENT in 1..99)" >&2
    exit 2
fi
percent=$1 text=$2
shift 2
mib=$(timeout 60 nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits -i 0) || exit 3
size=$((mib * percent / 100))
if [ "$size" -gt 65536 ]; then
    echo "GPU 0 has $mib MiB: $percent% of it is past the sweeps' 64 GiB limit; skipped"
    exit 77
fi
out=$("$@" -b "${size}M" -e "${size}M" 2>&1)
code=$?
echo "$out"
[ "$code" -eq 2 ] && grep -qF -- "$text" <<<"$out"
