#!/usr/bin/env bash
# hung_kernel_wait --mpi on 2 ranks, with mpirun told not to end the job when a rank exits non-zero (Open MPI
# 4's orte_abort_on_non_zero_status 0): rank 0 gives up on a kernel that spins for 30 s after 1 s, and its
# MPI_Abort must end rank 1, which waits in a barrier of 60 s, within a few seconds. Exits 77 (skipped)
# under another launcher than Open MPI 4's mpirun.
#
# usage: hung_kernel_wait_mpi.sh PROGRAM MPIEXEC [MPIEXEC_PREFLAGS...]
set -u
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../scripts/common.sh" || exit 3
program=$1 mpiexec=$2
shift 2
skip_unless_open_mpi "$mpiexec"
major=$(open_mpi_major "$mpiexec")
if [ "$major" -ge 5 ]; then
    echo "needs Open MPI 4's orte_abort_on_non_zero_status, which Open MPI $major no longer has: skipped"
    exit 77
fi
start=$(date +%s)
output=$(timeout -k 5 50 "$mpiexec" "$@" --mca orte_abort_on_non_zero_status 0 -np 2 "$program" --mpi 2>&1)
code=$?
elapsed=$(($(date +%s) - start))
echo "$output"
echo "exit $code after $elapsed s"
fail() {
    echo "FAILED: $1"
    exit 1
}
[ "$code" -ne 0 ] || fail "the job ended with exit 0"
[ "$code" -ne 124 ] && [ "$code" -ne 137 ] || fail "the job did not end within 50 s"
grep -q "has not finished a kernel that spins for 30 s within 1 s" <<<"$output" || fail "no message about the kernel"
[ "$elapsed" -lt 20 ] || fail "the job took $elapsed s: rank 1 was not ended at once"
echo "PASSED"
