#!/usr/bin/env bash
# Fault test of 05_nccl_mpi: TRIALS runs of 2 ranks in which rank 1 fails (--test-fault=FAULT:1). Every
# run must show that the fault fired (rank 1's "failing on purpose"), end non-zero within LIMIT_S seconds
# and leave no process behind; rank 0's message must also contain EXPECTED_TEXT when it is given.
#
# Usage: fault_test.sh VISIBLE_GPUS PROGRAM MPIEXEC FAULT LAUNCH TRIALS [EXPECTED_TEXT [PROGRAM_ARGS...]]
#   FAULT   KIND-before-POINT: exit|sigkill|stall, allreduce|bootstrap (see test_fault.hpp)
#   LAUNCH  mpirun     Open MPI's default: mpirun itself ends the job when a rank dies
#           survivors  mpirun is told not to (orte_abort_on_non_zero_status 0), so rank 0's own
#                      timeout (wait_for_nccl, --timeout 5) must end it
#   PROGRAM_ARGS  what the program runs (default: the small FWI, one iteration, no reference)
# Exits 77 (skipped) with fewer than 2 GPUs or another launcher than Open MPI's (survivors: Open MPI 4's),
# 3 when the GPUs cannot be counted.
set -u
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../scripts/common.sh" || exit 3
visible_gpus=$1
program=$2
mpiexec=$3
fault=$4
launch=$5
trials=$6
expected=${7:-}
program_args=("${@:8}")
[ ${#program_args[@]} -gt 0 ] || program_args=(--problem small --iterations 1 --no-reference)
timeout_s=5
limit_s=90  # start-up (CUDA, NCCL init, warm-up) + --timeout + teardown, with a wide margin

have=$(count_visible_gpus "$visible_gpus") || exit 3  # a broken counter fails the test, not skips it
if [ "$have" -lt 2 ]; then
    echo "needs 2 GPUs, $have visible: skipped"
    exit 77
fi
skip_unless_open_mpi "$mpiexec"
launch_flags=()
if [ "$launch" = survivors ]; then
    major=$(open_mpi_major "$mpiexec")
    if [ "$major" -ge 5 ]; then
        echo "needs Open MPI 4's orte_abort_on_non_zero_status, which Open MPI $major (PRRTE) no longer has: skipped"
        exit 77
    fi
    launch_flags=(--mca orte_abort_on_non_zero_status 0)
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The processes whose command line holds TEXT: pgrep -f's answer, read from /proc, since a minimal image has
# no procps (pgrep not found would read as none left running).
processes_with() {
    local cmdline line
    for cmdline in /proc/[0-9]*/cmdline; do
        line="$({ tr '\0' ' ' <"$cmdline"; } 2>/dev/null)" || continue  # a process may end meanwhile
        if [[ "$line" == *"$1"* ]]; then
            cmdline="${cmdline#/proc/}"
            echo "${cmdline%/cmdline}"
        fi
    done
}
passed=0
for trial in $(seq 1 "$trials"); do
    marker="$work/trial-$trial.json"  # unique on the command line: how this trial's processes are found
    start_ns=$(date +%s%N)
    timeout -k 5 "$limit_s" "$mpiexec" --oversubscribe -np 2 "${launch_flags[@]}" -x NCCL_NVLS_ENABLE=0 \
        "$program" "${program_args[@]}" --timeout "$timeout_s" \
        "--test-fault=$fault:1" --json "$marker" >"$work/output.txt" 2>&1
    code=$?
    elapsed_s=$(( ($(date +%s%N) - start_ns) / 1000000000 ))
    sleep 1
    left=$(processes_with "$marker" | tr '\n' ' ')

    problem=""
    if [ "$code" -eq 0 ]; then problem="exit 0 although rank 1 failed"; fi
    if [ "$elapsed_s" -ge "$limit_s" ]; then problem="still running after $limit_s s (killed by timeout)"; fi
    if [ -n "$left" ]; then
        problem="processes left running: $left"
        kill -9 $left 2>/dev/null
    fi
    # Without it, a run that ended at start-up for another reason (a refused flag, NCCL failing to
    # start) would pass as a fault handled.
    if ! grep -q -- "failing on purpose" "$work/output.txt"; then
        problem="${problem:+$problem; }the fault did not fire (no 'failing on purpose' from rank 1)"
    fi
    if [ -n "$expected" ] && ! grep -q -- "$expected" "$work/output.txt"; then
        problem="${problem:+$problem; }no message containing '$expected'"
    fi
    if [ -z "$problem" ]; then
        passed=$((passed + 1))
        echo "trial $trial/$trials: exit $code after $elapsed_s s: ok"
    else
        echo "trial $trial/$trials: exit $code after $elapsed_s s: FAILED: $problem"
        sed 's/^/    | /' "$work/output.txt"
    fi
done
echo "$passed of $trials trials passed (fault $fault on rank 1, launch $launch)"
[ "$passed" -eq "$trials" ]
