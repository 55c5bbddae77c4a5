#!/usr/bin/env bash
# The gradient and the model stay on the GPUs through an iteration of 04, 05 and 06: each runs twice,
# with 2 and with 4 iterations, under the copy-counting shim (copy_counter.cpp), and the two runs must
# make the same number of host<->device copies of 1 KiB or more (the set-up and the final copies for
# verification and output are the same in both; an iteration adds none). The control: 03 with the
# pageable combine stages the gradient through the host, so its extra iterations must add copies: if
# they do not, the shim is not seeing the program's copies and the test fails instead of passing.
#
# usage: no_host_copies.sh SHIM BIN_DIR GPUS MPIRUN...
set -uo pipefail
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../scripts/common.sh" || exit 3
shim=$1 bin=$2 gpus=$3
shift 3
mpirun=("$@")
skip_unless_open_mpi "${mpirun[0]}"  # it passes LD_PRELOAD on with -x
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
common=(--problem small --no-reference)

# copies PROGRAM_AND_ARGS...: total copies (both directions and cudaMemcpyDefault's, whose direction the
# shim cannot tell, of every process) the command made.
copies() {
    local log="$work/log.txt"
    if ! LD_PRELOAD="$shim" "$@" >"$log" 2>&1; then
        echo "FAILED: $*" >&2
        tail -n 20 "$log" >&2
        exit 1
    fi
    grep '^copy-counter:' "$log" | awk '{sum += $5 + $10 + $15} END {print sum + 0}'
}

# Open MPI passes LD_PRELOAD on to the ranks with -x.
mpi=("${mpirun[@]}" -x LD_PRELOAD -np "$gpus")
declare -A per_iteration
check() {
    local name=$1 expect=$2
    shift 2
    local two four
    two=$(copies "$@" --iterations 2) || exit 1
    four=$(copies "$@" --iterations 4) || exit 1
    per_iteration[$name]=$(((four - two) / 2))
    echo "$name: $two copies with 2 iterations, $four with 4: ${per_iteration[$name]} per iteration (all processes)"
    if [ "$expect" = none ] && [ "$four" -ne "$two" ]; then
        echo "FAILED: $name copies between host and device inside its iterations" >&2
        exit 1
    fi
    if [ "$expect" = some ] && [ "$four" -le "$two" ]; then
        echo "FAILED: the control ($name) shows no copies per iteration: the shim does not see this build's copies" >&2
        exit 1
    fi
}

check 03_pageable some "${mpi[@]}" "$bin/03_host_staged_mpi/03_host_staged_mpi" "${common[@]}" --combine pageable
check 04_threads none "$bin/04_nccl_threads/04_nccl_threads" "${common[@]}" --gpus "$gpus" --driver threads
check 04_group none "$bin/04_nccl_threads/04_nccl_threads" "${common[@]}" --gpus "$gpus" --driver group
check 05 none "${mpi[@]}" "$bin/05_nccl_mpi/05_nccl_mpi" "${common[@]}"
check 06 none "${mpi[@]}" "$bin/06_fwi_shot_parallel/06_fwi_shot_parallel" "${common[@]}" --no-plots \
    --save-every 0 --out "$work/06"
echo "passed: 04, 05 and 06 copy neither gradient nor model between host and device inside an iteration"
