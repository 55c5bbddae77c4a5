#!/usr/bin/env bash
# Bad launch: one rank more than there are GPUs. 05_nccl_mpi and 06_fwi_shot_parallel must refuse (two
# ranks would share a GPU) with exit 3 and a message that says so, before NCCL is started. Exits 77
# (skipped) without a GPU or Open MPI's mpirun, 3 when the GPUs cannot be counted.
# Usage: more_ranks_than_gpus.sh VISIBLE_GPUS PROGRAM MPIEXEC [FLAG...]   (FLAGs: the program's, added)
set -u
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../scripts/common.sh" || exit 3
visible_gpus=$1
program=$2
mpiexec=$3
shift 3
have=$(count_visible_gpus "$visible_gpus") || exit 3  # a broken counter fails the test, not skips it
if [ "$have" -lt 1 ]; then
    echo "needs a GPU, none visible: skipped"
    exit 77
fi
skip_unless_open_mpi "$mpiexec"
ranks=$((have + 1))
output=$(timeout -k 5 120 "$mpiexec" --oversubscribe -np "$ranks" -x NCCL_NVLS_ENABLE=0 "$program" \
    --problem small --nshots "$ranks" --iterations 1 --no-reference --timeout 10 "$@" 2>&1)
code=$?
echo "$output"
if [ "$code" -ne 3 ]; then
    echo "FAILED: $ranks ranks on $have GPU(s) gave exit $code, expected 3"
    exit 1
fi
# The refusal itself, not a warning about sharing followed by NCCL failing on the shared GPU (exit 3 too).
if ! grep -q "this program needs one GPU per rank" <<<"$output"; then
    echo "FAILED: no refusal saying that the program needs one GPU per rank"
    exit 1
fi
if grep -q "NCCL call" <<<"$output"; then
    echo "FAILED: NCCL was started (an 'NCCL call' failed) before the refusal"
    exit 1
fi
echo "ok: $ranks ranks on $have GPU(s) refused with exit 3"
