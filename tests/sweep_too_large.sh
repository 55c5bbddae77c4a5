#!/usr/bin/env bash
# Usage: sweep_too_large.sh VISIBLE_GPUS_PROGRAM BUFFERS TEXT COMMAND [ARG...]
# Runs COMMAND -b S -e S, an allreduce sweep of one size S: GPU 0's memory / BUFFERS + 1 GiB, so that BUFFERS
# buffers of S cannot fit on it (and one fewer can). Passes when COMMAND refuses it with exit 2 and TEXT in
# its output. Skipped (77) where S would be past the sweeps' 64 GiB limit: on such a GPU every sweep the
# programs allow fits, so there is nothing to refuse. GPU 0 is CUDA's (visible_gpus --memory-mib), which
# nvidia-smi's GPU 0 need not be (CUDA_VISIBLE_DEVICES, or GPUs of several models).
set -u
if [ $# -lt 4 ] || ! [[ "$2" =~ ^[1-9]$ ]]; then
    echo "sweep_too_large: usage: sweep_too_large.sh VISIBLE_GPUS_PROGRAM BUFFERS TEXT COMMAND [ARG...] (BUFFERS in 1..9)" >&2
    exit 2
fi
visible_gpus=$1 buffers=$2 text=$3
shift 3
mib=$(timeout 60 "$visible_gpus" --memory-mib | head -n 1)
[[ "$mib" =~ ^[1-9][0-9]*$ ]] || { echo "sweep_too_large: $visible_gpus --memory-mib gave no memory size" >&2; exit 3; }
size=$((mib / buffers + 1024))
if [ "$size" -gt 65536 ]; then
    echo "GPU 0 has $mib MiB: $buffers buffers of the sweeps' largest size, 64 GiB, fit on it; nothing to refuse: skipped"
    exit 77
fi
out=$("$@" -b "${size}M" -e "${size}M" 2>&1)
code=$?
echo "$out"
[ "$code" -eq 2 ] && grep -qF -- "$text" <<<"$out"
