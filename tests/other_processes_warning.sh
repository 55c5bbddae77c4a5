#!/usr/bin/env bash
# The lessons warn when another process holds a GPU they use (warn_of_other_processes, common/device.hpp):
# with hold_gpu holding a context on GPU 0, 01 and 05 (one rank) must say so, naming the holder's pid.
# (That a run on idle GPUs says nothing is not tested: under ctest -j other tests share the GPU.) Skips
# (77) where neither visible_gpus nor nvidia-smi lists hold_gpu by this PID namespace's id (NVML cannot list
# the GPU's processes, or a container hides them or shows them under the host's pids). Where nvidia-smi lists
# it, visible_gpus must too: the lessons' warning uses the same listing, so one that fails or loses the
# holder fails the test, not skips it.
# Skips too where a GPU is in exclusive-process compute mode: the lessons could not open hold_gpu's GPU.
#
# usage: other_processes_warning.sh BIN_DIR MPIRUN...   (MPIRUN: the launcher, its flags and its flag for the
#        number of processes, last: `mpirun -np`, `srun -n`)
set -uo pipefail
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../scripts/common.sh" || exit 3
skip_where_gpus_take_one_process "the lessons could not open the GPU that hold_gpu holds"
bin=$1
shift
mpirun=("$@")
work=$(mktemp -d)
holder=""
trap '[ -z "$holder" ] || kill "$holder" 2>/dev/null; rm -rf "$work"' EXIT

"$bin/tests/hold_gpu" 280 >"$work/holder.txt" 2>&1 &
holder=$!
for _ in $(seq 300); do grep -q holding "$work/holder.txt" && break; sleep 0.1; done
grep -q holding "$work/holder.txt" || { echo "FAILED: hold_gpu did not start: $(cat "$work/holder.txt")"; exit 1; }
listed=$("$bin/common/visible_gpus" --other-processes 2>&1)
listed_code=$?
if [ "$listed_code" -ne 0 ] || [[ "$listed" != *"pid $holder "* ]]; then
    # nvidia-smi, asked on its own: where it lists hold_gpu by this namespace's pid, so must visible_gpus,
    # whether its listing failed (exit 3) or left the holder out.
    if ! smi_pids=$(quick_query nvidia-smi --query-compute-apps=pid --format=csv,noheader 2>/dev/null); then
        echo "SKIPPED: visible_gpus --other-processes does not list hold_gpu (exit $listed_code: $listed), and" \
             "nvidia-smi cannot be asked to tell whether it should"
        exit 77
    fi
    if grep -qx " *$holder *" <<<"$smi_pids"; then
        echo "FAILED: nvidia-smi lists hold_gpu (pid $holder), visible_gpus --other-processes does not" \
             "(exit $listed_code): $listed"
        exit 1
    fi
    echo "SKIPPED: neither visible_gpus nor nvidia-smi lists hold_gpu by this namespace's pid $holder: $listed"
    exit 77
fi

failed=0
# expect NAME START COMMAND...: COMMAND ends with exit 0, and a line of its output begins its warning with
# START and names hold_gpu (other tests may hold the GPU too, listed before or after it).
expect() {
    local name=$1 start=$2 line
    shift 2
    if ! "$@" >"$work/$name.txt" 2>&1; then
        echo "FAILED: $name: exit $?: $(tail -n 5 "$work/$name.txt")"
        failed=1
        return
    fi
    line=$(grep -F -- "$start" "$work/$name.txt" | head -n 1)
    if [ -z "$line" ] || [[ "$line" != *"GPU 0: pid $holder (hold_gpu"* ]]; then
        echo "FAILED: $name: no line beginning '$start' and naming hold_gpu (pid $holder) in: $(head -n 8 "$work/$name.txt")"
        failed=1
    else
        echo "ok: $name: $line"
    fi
}
small=(--problem small --iterations 1)
expect 01_single_gpu "01_single_gpu: warning: other processes hold a GPU this run uses; where they compute, the times it measures are slower and vary: " \
    "$bin/01_single_gpu/01_single_gpu" "${small[@]}" --out "$work/01"
expect 05_nccl_mpi "05_nccl_mpi (rank 0): warning: on host " \
    "${mpirun[@]}" 1 "$bin/05_nccl_mpi/05_nccl_mpi" "${small[@]}" --no-reference
exit $failed
