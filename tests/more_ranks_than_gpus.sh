#!/usr/bin/env bash
# One rank more than there are GPUs. EXPECT "refused": the program (05_nccl_mpi, 06_fwi_shot_parallel)
# must refuse (two ranks would share a GPU) with exit 3 and a message that says so, before NCCL is started.
# EXPECT "shared": the program (03_host_staged_mpi) runs with two ranks on one GPU, exit 0, and warns that
# they share it. Exits 77 (skipped) without a GPU or Open MPI's mpirun, and for "shared" where a GPU is in
# exclusive-process compute mode (one process at a time); 3 when the GPUs cannot be counted.
# Usage: more_ranks_than_gpus.sh VISIBLE_GPUS PROGRAM MPIEXEC EXPECT [FLAG...]   (FLAGs: the program's, added)
set -u
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../scripts/common.sh" || exit 3
visible_gpus=$1
program=$2
mpiexec=$3
expect=$4
shift 4
is_one_of "$expect" refused shared || { echo "EXPECT: '$expect' is neither refused nor shared" >&2; exit 2; }
have=$(count_visible_gpus "$visible_gpus") || exit 3  # a broken counter fails the test, not skips it
if [ "$have" -lt 1 ]; then
    echo "needs a GPU, none visible: skipped"
    exit 77
fi
skip_unless_open_mpi "$mpiexec"
[ "$expect" != shared ] || skip_where_gpus_take_one_process "two ranks cannot share one there"
ranks=$((have + 1))
output=$(timeout -k 5 120 "$mpiexec" --oversubscribe -np "$ranks" -x NCCL_NVLS_ENABLE=0 "$program" \
    --problem small --nshots "$ranks" --iterations 1 --no-reference --timeout 10 "$@" 2>&1)
code=$?
echo "$output"
fail() { echo "FAILED: $*"; exit 1; }
if [ "$expect" = shared ]; then
    [ "$code" -eq 0 ] || fail "$ranks ranks on $have GPU(s) gave exit $code, expected 0 (two ranks sharing a GPU)"
    grep -q "share GPU .*so timings are not those of one rank per GPU" <<<"$output" ||
        fail "no warning that two ranks share a GPU"
    echo "ok: $ranks ranks on $have GPU(s) ran, with the warning that two share a GPU"
    exit 0
fi
[ "$code" -eq 3 ] || fail "$ranks ranks on $have GPU(s) gave exit $code, expected 3"
# The refusal itself, not a warning about sharing followed by NCCL failing on the shared GPU (exit 3 too).
grep -q "this program needs one GPU per rank" <<<"$output" || fail "no refusal saying that the program needs one GPU per rank"
! grep -q "NCCL call" <<<"$output" || fail "NCCL was started (an 'NCCL call' failed) before the refusal"
echo "ok: $ranks ranks on $have GPU(s) refused with exit 3"
