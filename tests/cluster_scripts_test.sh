#!/usr/bin/env bash
# The launch recipes of scripts/cluster/ without a cluster: every script's syntax (bash -n); the #SBATCH
# lines of every *.sbatch (where sbatch reads them, the options and values it takes, one task per GPU);
# the launch line each recipe prints in a dry run, inside a fake Slurm allocation (SLURM_* variables), with
# srun and with mpirun, outside one (from the #SBATCH lines) and from a hostfile; their refusals (exit 2,
# a missing program or launcher exit 3); and a real launch through a fake srun and mpirun on PATH, which get exactly
# the line printed and NCCL_NVLS_ENABLE=0. Fake programs stand in for the built ones. No GPU, no MPI.
#
# usage: tests/cluster_scripts_test.sh [REPO_ROOT]     exit 0 when every case passes
set -uo pipefail
repo="${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
cluster="$repo/scripts/cluster"
[ -f "$cluster/common.sh" ] || { echo "no $cluster/common.sh" >&2; exit 1; }

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok:   $*"; }

# A build folder and an install's bin folder holding fake programs.
build="$tmp/build" prefix="$tmp/prefix/bin"
mkdir -p "$prefix" "$tmp/fakes"
for program in 03_host_staged_mpi 05_nccl_mpi 06_fwi_shot_parallel doctor; do
    mkdir -p "$build/$program"
    printf '#!/bin/sh\nexit 0\n' >"$build/$program/$program"
    chmod +x "$build/$program/$program"
done
cp "$build/06_fwi_shot_parallel/06_fwi_shot_parallel" "$prefix/"
printf 'node1 slots=4\n# a comment\n\n  node2 slots=4\n  # an indented comment\n' >"$tmp/hosts"

# run VAR=value... -- COMMAND...: COMMAND in an environment of only the variables given (and PATH, HOME),
# so that no SLURM_* or NCCL_* variable of the machine running the test leaks in. Sets out, err, code.
run() {
    local vars=()
    while [ "$1" != -- ]; do vars+=("$1"); shift; done
    shift
    out="$(env -i PATH="$PATH" HOME="$HOME" "${vars[@]}" "$@" 2>"$tmp/stderr")"
    code=$?
    err="$(cat "$tmp/stderr")"
}

# expect_line NAME LINE VAR=value... -- COMMAND...: exit 0 and stdout exactly LINE.
expect_line() {
    local name=$1 line=$2
    shift 2
    run "$@"
    if [ "$code" -eq 0 ] && [ "$out" = "$line" ]; then
        pass "$name"
    else
        fail "$name: exit $code, printed"
        printf '  got:      %s\n  expected: %s\n  stderr:   %s\n' "$out" "$line" "$err"
    fi
}

# expect_refusal NAME CODE TEXT VAR=value... -- COMMAND...: exit CODE and TEXT in stderr.
expect_refusal() {
    local name=$1 expected_code=$2 text=$3
    shift 3
    run "$@"
    if [ "$code" -eq "$expected_code" ] && [[ "$err" == *"$text"* ]]; then
        pass "$name"
    else
        fail "$name: exit $code (expected $expected_code), stderr: $err (expected to contain: $text)"
    fi
}

# ---- syntax ----
for script in "$cluster"/*.sh "$cluster"/*.sbatch; do
    if bash -n "$script" 2>"$tmp/syntax"; then pass "bash -n $(basename "$script")"; else fail "bash -n $script: $(cat "$tmp/syntax")"; fi
done

# ---- #SBATCH lines ----
# sbatch reads #SBATCH lines only up to the first line that is neither blank nor a comment; past it they
# are silently ignored. Each has the form --option=value, with an option and value sbatch takes; the recipes
# need one task per GPU.
check_sbatch_lines() {
    local file=$1 line option value number=0 first_command=0 problems=()
    declare -A seen=()
    while IFS= read -r line; do
        number=$((number + 1))
        if [ "$first_command" -eq 0 ] && [[ -n "${line//[[:space:]]/}" && "$line" != \#* ]]; then
            first_command=$number
        fi
        [[ "$line" == "#SBATCH"* ]] || continue
        [ "$first_command" -eq 0 ] || problems+=("line $number: #SBATCH after the first command (line $first_command) is ignored")
        if [[ ! "$line" =~ ^#SBATCH\ --([a-z-]+)=([^[:space:]]+)$ ]]; then
            problems+=("line $number: not '#SBATCH --option=value': $line")
            continue
        fi
        option="${BASH_REMATCH[1]}" value="${BASH_REMATCH[2]}"
        [ -z "${seen[$option]:-}" ] || problems+=("line $number: --$option given twice")
        seen[$option]="$value"
        case "$option" in
            nodes | ntasks-per-node | cpus-per-task) [[ "$value" =~ ^[1-9][0-9]*$ ]] || problems+=("--$option=$value: not a count") ;;
            gpus-per-node) [[ "$value" =~ ^([a-z0-9_]+:)?[1-9][0-9]*$ ]] || problems+=("--$option=$value: not [type:]count") ;;
            # minutes, minutes:seconds, hours:minutes:seconds, days-hours[:minutes[:seconds]]
            time) [[ "$value" =~ ^([0-9]+-[0-9]{1,2}(:[0-9]{1,2}){0,2}|[0-9]+(:[0-9]{1,2}){0,2})$ ]] ||
                problems+=("--time=$value: not one of Slurm's time formats") ;;
            job-name | output | error | partition | account) ;;
            *) problems+=("line $number: --$option is not an option these recipes use") ;;
        esac
    done <"$file"
    for option in nodes ntasks-per-node gpus-per-node time; do
        [ -n "${seen[$option]:-}" ] || problems+=("no #SBATCH --$option")
    done
    [ "${seen[ntasks-per-node]:-}" = "${seen[gpus-per-node]##*:}" ] ||
        problems+=("--ntasks-per-node=${seen[ntasks-per-node]:-} differs from --gpus-per-node=${seen[gpus-per-node]:-}")
    if [ ${#problems[@]} -eq 0 ]; then
        pass "#SBATCH lines of $(basename "$file")"
    else
        fail "#SBATCH lines of $(basename "$file"): $(printf '%s; ' "${problems[@]}")"
    fi
}
recipes=("$cluster"/*.sbatch)
[ ${#recipes[@]} -eq 3 ] || fail "expected the 3 sbatch recipes (03, 05, 06), found ${#recipes[@]}"
for recipe in "${recipes[@]}"; do check_sbatch_lines "$recipe"; done
# The checker itself finds what sbatch would ignore or refuse.
printf '#!/bin/bash\n#SBATCH --nodes=2\nset -u\n#SBATCH --ntasks-per-node=4\n#SBATCH --gpus-per-node=4\n#SBATCH --time=1h\n' >"$tmp/bad.sbatch"
if check_sbatch_lines "$tmp/bad.sbatch" | grep "after the first command" | grep -q "Slurm's time formats"; then
    pass "the #SBATCH check finds a directive after a command, and a bad --time"
else
    fail "the #SBATCH check missed a directive after a command"
fi

# ---- the sbatch recipes inside a fake allocation ----
allocation=(SLURM_JOB_ID=42 SLURM_JOB_NUM_NODES=2 SLURM_NTASKS=8 SLURM_NTASKS_PER_NODE=4 SLURM_GPUS_PER_NODE=4)
for program in 03_host_staged_mpi 05_nccl_mpi 06_fwi_shot_parallel; do
    expect_line "$program.sbatch: srun --mpi=pmix in an allocation" \
        "srun --mpi=pmix --export=ALL --kill-on-bad-exit=1 --cpu-bind=none $build/$program/$program --problem large" \
        "${allocation[@]}" FWI_BIN_DIR="$build" FWI_DRY_RUN=1 -- bash "$cluster/$program.sbatch" --problem large
done
expect_line "05 with FWI_LAUNCHER=mpirun: one rank per GPU of each node, NCCL_* handed to every rank" \
    "mpirun -np 8 --map-by ppr:4:node --bind-to none -x NCCL_NVLS_ENABLE=0 -x PATH -x LD_LIBRARY_PATH -x NCCL_IB_HCA -x NCCL_SOCKET_IFNAME $build/05_nccl_mpi/05_nccl_mpi --bench-allreduce --transport network" \
    "${allocation[@]}" FWI_LAUNCHER=mpirun NCCL_SOCKET_IFNAME=ib0 NCCL_IB_HCA=mlx5_0 LD_LIBRARY_PATH=/opt/nccl/lib \
    -- bash "$cluster/05_nccl_mpi.sbatch" --dry-run --bin-dir "$build" --bench-allreduce --transport network
expect_line "06: --bin-dir an install's bin folder, a typed --gpus-per-node, the job's --cpus-per-task, an argument with a blank" \
    "srun --mpi=pmi2 --export=ALL --kill-on-bad-exit=1 --cpu-bind=none --cpus-per-task=8 $prefix/06_fwi_shot_parallel --out my\\ run" \
    SLURM_JOB_ID=42 SLURM_NNODES=1 SLURM_NTASKS_PER_NODE=8 SLURM_GPUS_PER_NODE=h100:8 SLURM_CPUS_PER_TASK=8 FWI_SRUN_MPI=pmi2 \
    -- bash "$cluster/06_fwi_shot_parallel.sbatch" --bin-dir="$prefix" --dry-run -- --out "my run"
expect_line "outside an allocation a dry run takes the counts from the #SBATCH lines (2 nodes x 4 GPUs)" \
    "mpirun -np 8 --map-by ppr:4:node --bind-to none -x NCCL_NVLS_ENABLE=0 -x PATH $build/03_host_staged_mpi/03_host_staged_mpi --combine pinned" \
    FWI_LAUNCHER=mpirun FWI_BIN_DIR="$build" -- bash "$cluster/03_host_staged_mpi.sbatch" --dry-run --combine pinned
expect_line "FWI_MPIRUN_FLAGS go before the program" \
    "mpirun -np 8 --map-by ppr:4:node --bind-to none -x NCCL_NVLS_ENABLE=0 -x PATH --prefix /opt/openmpi --mca btl_tcp_if_include eth0 $build/05_nccl_mpi/05_nccl_mpi" \
    "${allocation[@]}" FWI_LAUNCHER=mpirun FWI_MPIRUN_FLAGS="--prefix /opt/openmpi --mca btl_tcp_if_include eth0" \
    FWI_BIN_DIR="$build" FWI_DRY_RUN=1 -- bash "$cluster/05_nccl_mpi.sbatch"
expect_line "outside an allocation srun takes --cpus-per-task from the #SBATCH lines" \
    "srun --mpi=pmix --export=ALL --kill-on-bad-exit=1 --cpu-bind=none --cpus-per-task=4 $build/06_fwi_shot_parallel/06_fwi_shot_parallel" \
    FWI_BIN_DIR="$build" -- bash "$cluster/06_fwi_shot_parallel.sbatch" --dry-run
expect_line "under Slurm mpirun hands on UCX_* and FI_*, not CUDA_VISIBLE_DEVICES (Slurm sets it on each node)" \
    "mpirun -np 8 --map-by ppr:4:node --bind-to none -x NCCL_NVLS_ENABLE=0 -x PATH -x FI_PROVIDER -x UCX_NET_DEVICES $build/05_nccl_mpi/05_nccl_mpi" \
    "${allocation[@]}" FWI_LAUNCHER=mpirun CUDA_VISIBLE_DEVICES=0,1,2,3 UCX_NET_DEVICES=mlx5_0:1 FI_PROVIDER=efa \
    FWI_BIN_DIR="$build" FWI_DRY_RUN=1 -- bash "$cluster/05_nccl_mpi.sbatch"
# Run from elsewhere (sbatch runs a copy in its spool folder): the repository comes from SLURM_SUBMIT_DIR.
mkdir -p "$tmp/spool"
cp "$cluster/05_nccl_mpi.sbatch" "$tmp/spool/slurm_script"
mkdir -p "$tmp/repo/scripts/cluster" && cp "$cluster/common.sh" "$tmp/repo/scripts/cluster/" && ln -s "$build" "$tmp/repo/build"
expect_line "a spool copy finds the repository from SLURM_SUBMIT_DIR, and its build folder" \
    "srun --mpi=pmix --export=ALL --kill-on-bad-exit=1 --cpu-bind=none $tmp/repo/build/05_nccl_mpi/05_nccl_mpi" \
    "${allocation[@]}" SLURM_SUBMIT_DIR="$tmp/repo" FWI_DRY_RUN=1 -- bash "$tmp/spool/slurm_script"

# ---- refusals ----
expect_refusal "outside an allocation, a real run is refused" 2 "not inside a Slurm job" \
    FWI_BIN_DIR="$build" -- bash "$cluster/05_nccl_mpi.sbatch"
expect_refusal "a --gpus-per-node of several kinds of GPU" 2 "--gpus-per-node: 'a100:2,h100:2' names several kinds" \
    SLURM_JOB_ID=42 SLURM_JOB_NUM_NODES=2 SLURM_NTASKS_PER_NODE=4 SLURM_GPUS_PER_NODE=a100:2,h100:2 \
    FWI_BIN_DIR="$build" -- bash "$cluster/05_nccl_mpi.sbatch"
expect_refusal "a --cpus-per-task that is not a count" 2 "--cpus-per-task: 'x' is not a count" \
    "${allocation[@]}" SLURM_CPUS_PER_TASK=x FWI_BIN_DIR="$build" -- bash "$cluster/05_nccl_mpi.sbatch"
expect_refusal "--ntasks-per-node unlike --gpus-per-node" 2 "--ntasks-per-node=2 with --gpus-per-node=4" \
    SLURM_JOB_ID=42 SLURM_JOB_NUM_NODES=2 SLURM_NTASKS_PER_NODE=2 SLURM_GPUS_PER_NODE=4 FWI_BIN_DIR="$build" \
    -- bash "$cluster/05_nccl_mpi.sbatch" --dry-run
expect_line "--gres=gpu:4 in place of --gpus-per-node: the GPUs on the node (SLURM_GPUS_ON_NODE)" \
    "srun --mpi=pmix --export=ALL --kill-on-bad-exit=1 --cpu-bind=none $build/05_nccl_mpi/05_nccl_mpi" \
    SLURM_JOB_ID=42 SLURM_JOB_NUM_NODES=2 SLURM_NTASKS_PER_NODE=4 SLURM_GPUS_ON_NODE=4 FWI_BIN_DIR="$build" \
    -- bash "$cluster/05_nccl_mpi.sbatch" --dry-run
expect_line "--gres=gpu:4 where Slurm lists the GPUs only (SLURM_JOB_GPUS)" \
    "srun --mpi=pmix --export=ALL --kill-on-bad-exit=1 --cpu-bind=none $build/05_nccl_mpi/05_nccl_mpi" \
    SLURM_JOB_ID=42 SLURM_JOB_NUM_NODES=2 SLURM_NTASKS_PER_NODE=4 SLURM_JOB_GPUS=0,1,2,3 FWI_BIN_DIR="$build" \
    -- bash "$cluster/05_nccl_mpi.sbatch" --dry-run
expect_refusal "--gres=gpu:2 with --ntasks-per-node=4" 2 "--ntasks-per-node=4 with --gres=gpu:2" \
    SLURM_JOB_ID=42 SLURM_JOB_NUM_NODES=2 SLURM_NTASKS_PER_NODE=4 SLURM_JOB_GPUS=0,1 FWI_BIN_DIR="$build" \
    -- bash "$cluster/05_nccl_mpi.sbatch" --dry-run
expect_refusal "no --gpus-per-node in the allocation" 2 "--gpus-per-node: '' is not a count" \
    SLURM_JOB_ID=42 SLURM_JOB_NUM_NODES=2 SLURM_NTASKS_PER_NODE=4 FWI_BIN_DIR="$build" \
    -- bash "$cluster/05_nccl_mpi.sbatch" --dry-run
expect_refusal "an unknown FWI_LAUNCHER" 2 "FWI_LAUNCHER: 'torchrun' is not one of srun|mpirun" \
    "${allocation[@]}" FWI_LAUNCHER=torchrun FWI_BIN_DIR="$build" -- bash "$cluster/06_fwi_shot_parallel.sbatch" --dry-run
expect_refusal "a program that is not built" 3 "no built 05_nccl_mpi in $tmp/prefix" \
    "${allocation[@]}" FWI_BIN_DIR="$tmp/prefix" -- bash "$cluster/05_nccl_mpi.sbatch" --dry-run
mkdir -p "$tmp/not-executable/05_nccl_mpi"
printf '#!/bin/sh\nexit 0\n' >"$tmp/not-executable/05_nccl_mpi/05_nccl_mpi"  # not made executable
expect_refusal "a program that is not executable" 3 "no built 05_nccl_mpi in $tmp/not-executable" \
    "${allocation[@]}" FWI_BIN_DIR="$tmp/not-executable" -- bash "$cluster/05_nccl_mpi.sbatch" --dry-run
expect_refusal "a --bin-dir that is not a folder" 2 "--bin-dir (FWI_BIN_DIR): '$tmp/nowhere' is not a folder" \
    "${allocation[@]}" -- bash "$cluster/05_nccl_mpi.sbatch" --dry-run --bin-dir "$tmp/nowhere"
expect_refusal "--bin-dir without a value" 2 "--bin-dir: missing value" \
    "${allocation[@]}" -- bash "$cluster/05_nccl_mpi.sbatch" --bin-dir
expect_refusal "an empty --bin-dir" 2 "--bin-dir: needs a non-empty value" \
    "${allocation[@]}" -- bash "$cluster/05_nccl_mpi.sbatch" --dry-run --bin-dir ""
expect_refusal "--bin-dir given twice" 2 "--bin-dir given twice" \
    "${allocation[@]}" -- bash "$cluster/05_nccl_mpi.sbatch" --dry-run --bin-dir "$build" --bin-dir="$build"
expect_refusal "a node count that would overflow" 2 "--nodes: '99999999999999999999' is not a node count" \
    SLURM_JOB_ID=42 SLURM_JOB_NUM_NODES=99999999999999999999 SLURM_NTASKS_PER_NODE=4 SLURM_GPUS_PER_NODE=4 \
    FWI_BIN_DIR="$build" -- bash "$cluster/05_nccl_mpi.sbatch" --dry-run
expect_refusal "an SLURM_NTASKS that is not a count" 2 "--ntasks (SLURM_NTASKS): 'abc' is not a count" \
    SLURM_JOB_ID=42 SLURM_JOB_NUM_NODES=2 SLURM_NTASKS_PER_NODE=4 SLURM_GPUS_PER_NODE=4 SLURM_NTASKS=abc \
    FWI_LAUNCHER=mpirun FWI_BIN_DIR="$build" -- bash "$cluster/05_nccl_mpi.sbatch" --dry-run
expect_refusal "an SLURM_NTASKS past the allocation's tasks" 2 "9 ranks do not fit 2 node(s) x 4 tasks" \
    SLURM_JOB_ID=42 SLURM_JOB_NUM_NODES=2 SLURM_NTASKS_PER_NODE=4 SLURM_GPUS_PER_NODE=4 SLURM_NTASKS=9 \
    FWI_LAUNCHER=mpirun FWI_BIN_DIR="$build" -- bash "$cluster/05_nccl_mpi.sbatch" --dry-run
expect_refusal "a launcher that is not there" 3 "cannot start the launcher '$tmp/no-mpirun'" \
    "${allocation[@]}" FWI_LAUNCHER=mpirun FWI_MPIRUN="$tmp/no-mpirun" FWI_BIN_DIR="$build" \
    -- bash "$cluster/05_nccl_mpi.sbatch"
if ! command -v srun >/dev/null 2>&1; then  # no Slurm here: the allocation's srun is missing, mpirun is the way out
    expect_refusal "no srun: launch with mpirun" 3 "or launch with Open MPI's mpirun instead: FWI_LAUNCHER=mpirun" \
        "${allocation[@]}" FWI_BIN_DIR="$build" -- bash "$cluster/05_nccl_mpi.sbatch"
fi
expect_refusal "hostfile: a launcher that is not there" 3 "cannot start the launcher '$tmp/no-mpirun'" \
    FWI_MPIRUN="$tmp/no-mpirun" FWI_BIN_DIR="$build" \
    -- bash "$cluster/hostfile-run.sh" --hostfile "$tmp/hosts" --gpus-per-node 4 05_nccl_mpi
expect_refusal "an FWI_SRUN_MPI that names no plugin" 2 "FWI_SRUN_MPI: 'pmix --foo' is not the name of a Slurm MPI" \
    "${allocation[@]}" FWI_SRUN_MPI="pmix --foo" FWI_BIN_DIR="$build" -- bash "$cluster/05_nccl_mpi.sbatch" --dry-run
expect_refusal "a dry run whose line cannot be written" 3 "the launch line could not be written to standard output" \
    "${allocation[@]}" FWI_BIN_DIR="$build" -- bash -c 'exec "$@" >/dev/full' bash "$cluster/05_nccl_mpi.sbatch" --dry-run
# Outside an allocation, --help is the recipe's own (inside one it is the program's).
for recipe in "${recipes[@]}"; do
    run -- bash "$recipe" --help
    if [ "$code" -eq 0 ] && [[ "$out" == *"--dry-run"* ]] && ! grep -q '^#SBATCH' <<<"$out"; then
        pass "$(basename "$recipe") --help outside an allocation"
    else
        fail "$(basename "$recipe") --help outside an allocation: exit $code, stdout: $out, stderr: $err"
    fi
done

# ---- the hostfile recipe ----
hostfile_run="$cluster/hostfile-run.sh"
expect_line "hostfile: nodes x GPUs ranks, ppr:G:node, NCCL_* handed to every rank" \
    "mpirun --hostfile $tmp/hosts -np 8 --map-by ppr:4:node --bind-to none -x NCCL_NVLS_ENABLE=0 -x PATH -x LD_LIBRARY_PATH -x NCCL_DEBUG -x NCCL_SOCKET_IFNAME $build/05_nccl_mpi/05_nccl_mpi --bench-allreduce --transport network" \
    NCCL_SOCKET_IFNAME=eth0 NCCL_DEBUG=INFO LD_LIBRARY_PATH=/usr/local/cuda/lib64 NCCL_NVLS_ENABLE=1 \
    -- bash "$hostfile_run" --dry-run --bin-dir "$build" --hostfile "$tmp/hosts" --gpus-per-node 4 \
    05_nccl_mpi --bench-allreduce --transport network
expect_line "hostfile: CUDA_VISIBLE_DEVICES, UCX_* and FI_* handed to every rank (no scheduler sets them per node)" \
    "mpirun --hostfile $tmp/hosts -np 4 --map-by ppr:2:node --bind-to none -x NCCL_NVLS_ENABLE=0 -x PATH -x CUDA_VISIBLE_DEVICES -x FI_PROVIDER -x UCX_NET_DEVICES -x UCX_TLS $build/05_nccl_mpi/05_nccl_mpi" \
    CUDA_VISIBLE_DEVICES=2,3 UCX_NET_DEVICES=mlx5_0:1 UCX_TLS=rc,sm FI_PROVIDER=efa \
    -- bash "$hostfile_run" --dry-run --bin-dir "$build" --hostfile "$tmp/hosts" --gpus-per-node 2 05_nccl_mpi
expect_refusal "hostfile: a CUDA_VISIBLE_DEVICES of fewer GPUs than --gpus-per-node" 2 \
    "CUDA_VISIBLE_DEVICES='0' names 1 GPU(s), fewer than --gpus-per-node 4, and it is handed to every node" \
    CUDA_VISIBLE_DEVICES=0 -- bash "$hostfile_run" --dry-run --bin-dir "$build" --hostfile "$tmp/hosts" --gpus-per-node 4 05_nccl_mpi
expect_line "hostfile: --np, a program from an install's bin, options in any order, --option=value" \
    "mpirun --hostfile $tmp/hosts -np 3 --map-by ppr:2:node --bind-to none -x NCCL_NVLS_ENABLE=0 -x PATH $prefix/06_fwi_shot_parallel --iterations=2" \
    FWI_DRY_RUN=1 -- bash "$hostfile_run" --gpus-per-node=2 --np 3 --hostfile="$tmp/hosts" --bin-dir "$prefix" \
    06_fwi_shot_parallel --iterations=2
expect_line "hostfile: -- ends the options, the program's flags follow" \
    "mpirun --hostfile $tmp/hosts -np 16 --map-by ppr:8:node --bind-to none -x NCCL_NVLS_ENABLE=0 -x PATH $build/doctor/doctor --mpi" \
    FWI_BIN_DIR="$build" FWI_DRY_RUN=1 -- bash "$hostfile_run" --hostfile "$tmp/hosts" --gpus-per-node 8 -- doctor --mpi
expect_line "hostfile: doctor --mpi" \
    "mpirun --hostfile $tmp/hosts -np 16 --map-by ppr:8:node --bind-to none -x NCCL_NVLS_ENABLE=0 -x PATH $build/doctor/doctor --mpi" \
    FWI_BIN_DIR="$build" -- bash "$hostfile_run" --hostfile "$tmp/hosts" --gpus-per-node 8 --dry-run doctor --mpi
run -- bash "$hostfile_run" --help
if [ "$code" -eq 0 ] && [[ "$out" == *"--hostfile HOSTS --gpus-per-node G"* ]]; then pass "hostfile: --help"; else fail "hostfile: --help: exit $code"; fi
expect_refusal "hostfile: no PROGRAM" 2 "no PROGRAM" -- bash "$hostfile_run" --hostfile "$tmp/hosts" --gpus-per-node 4
expect_refusal "hostfile: a program that is not the suite's" 2 "PROGRAM: 'hostname' is not one of" \
    -- bash "$hostfile_run" --hostfile "$tmp/hosts" --gpus-per-node 4 hostname
expect_refusal "hostfile: no hostfile" 2 "--hostfile: missing" -- bash "$hostfile_run" --gpus-per-node 4 05_nccl_mpi
expect_refusal "hostfile: no --gpus-per-node" 2 "--gpus-per-node: missing; the GPUs of each node" \
    -- bash "$hostfile_run" --dry-run --hostfile "$tmp/hosts" 05_nccl_mpi
expect_refusal "hostfile: a hostfile that does not exist" 2 "--hostfile: '$tmp/none' is not a file" \
    -- bash "$hostfile_run" --hostfile "$tmp/none" --gpus-per-node 4 05_nccl_mpi
expect_refusal "hostfile: GPUs per node not a count" 2 "--gpus-per-node: 'four' is not a count (1..999999)" \
    -- bash "$hostfile_run" --hostfile "$tmp/hosts" --gpus-per-node four 05_nccl_mpi
expect_refusal "hostfile: --np 0" 2 "--np: '0' is not a count (1..999999)" \
    -- bash "$hostfile_run" --hostfile "$tmp/hosts" --gpus-per-node 4 --np 0 05_nccl_mpi
printf 'node1 slots=4\nnode1 slots=4\n' >"$tmp/hosts-twice"
expect_refusal "hostfile: a node named twice is one node" 2 "--np: 5 ranks do not fit 1 node(s) x 4 GPUs" \
    -- bash "$hostfile_run" --hostfile "$tmp/hosts-twice" --gpus-per-node 4 --np 5 05_nccl_mpi
expect_refusal "hostfile: more ranks than GPUs" 2 "--np: 9 ranks do not fit 2 node(s) x 4 GPUs (one rank per GPU); at most 8" \
    -- bash "$hostfile_run" --hostfile "$tmp/hosts" --gpus-per-node 4 --np 9 05_nccl_mpi
for option in --hostfile --gpus-per-node --np; do
    value="$tmp/hosts"
    [ "$option" = --hostfile ] || value=2
    expect_refusal "hostfile: $option given twice" 2 "$option given twice" \
        -- bash "$hostfile_run" --hostfile "$tmp/hosts" --gpus-per-node 4 --np 4 "$option" "$value" 05_nccl_mpi
done
expect_refusal "hostfile: --bin-dir given before and after its options" 2 "--bin-dir given twice" \
    -- bash "$hostfile_run" --bin-dir "$build" --hostfile "$tmp/hosts" --bin-dir="$build" --gpus-per-node 4 05_nccl_mpi
expect_line "hostfile: --bin-dir=DIR among its options" \
    "mpirun --hostfile $tmp/hosts -np 8 --map-by ppr:4:node --bind-to none -x NCCL_NVLS_ENABLE=0 -x PATH $build/doctor/doctor --mpi" \
    -- bash "$hostfile_run" --hostfile "$tmp/hosts" --bin-dir="$build" --gpus-per-node 4 --dry-run doctor --mpi
expect_refusal "hostfile: programs given as one argument" 2 "PROGRAM: '05_nccl_mpi doctor' is not one of" \
    -- bash "$hostfile_run" --hostfile "$tmp/hosts" --gpus-per-node 4 "05_nccl_mpi doctor"
for value in true yes 2; do
    expect_refusal "hostfile: FWI_DRY_RUN=$value" 2 "FWI_DRY_RUN: '$value' is not 1 (print the launch line only) or 0 (run it)" \
        FWI_DRY_RUN="$value" -- bash "$hostfile_run" --hostfile "$tmp/hosts" --gpus-per-node 4 05_nccl_mpi
done
expect_refusal "a recipe with FWI_DRY_RUN=yes" 2 "FWI_DRY_RUN: 'yes' is not 1" \
    "${allocation[@]}" FWI_DRY_RUN=yes FWI_BIN_DIR="$build" -- bash "$cluster/05_nccl_mpi.sbatch"
# Counts that would overflow the shell's arithmetic (nodes x GPUs) are refused, not wrapped around.
expect_refusal "hostfile: GPUs per node too large" 2 "--gpus-per-node: '9223372036854775807' is not a count" \
    -- bash "$hostfile_run" --hostfile "$tmp/hosts" --gpus-per-node 9223372036854775807 05_nccl_mpi
expect_refusal "hostfile: an unknown option" 2 "unknown option '--nodes'" \
    -- bash "$hostfile_run" --hostfile "$tmp/hosts" --nodes 2 05_nccl_mpi
printf '# nothing\n\n' >"$tmp/empty-hosts"
expect_refusal "hostfile: a hostfile without nodes" 2 "names no node" \
    -- bash "$hostfile_run" --hostfile "$tmp/empty-hosts" --gpus-per-node 4 05_nccl_mpi
# An empty value is refused, not taken as the default (`--np ''` once started nodes x GPUs ranks).
expect_refusal "hostfile: --np ''" 2 "--np: needs a non-empty value" \
    -- bash "$hostfile_run" --hostfile "$tmp/hosts" --gpus-per-node 4 --np '' 05_nccl_mpi
expect_refusal "hostfile: --hostfile ''" 2 "--hostfile: needs a non-empty value" \
    -- bash "$hostfile_run" --hostfile '' --gpus-per-node 4 05_nccl_mpi
# A hostfile that cannot be read is named as such (it used to be a shell error and "names no node"). Root
# reads any file, so there the case cannot be made.
printf 'node1 slots=4\n' >"$tmp/unreadable-hosts"
chmod 000 "$tmp/unreadable-hosts"
if [ -r "$tmp/unreadable-hosts" ]; then
    echo "skip: hostfile: a hostfile that cannot be read (this user reads any file)"
else
    expect_refusal "hostfile: a hostfile that cannot be read" 2 "--hostfile: '$tmp/unreadable-hosts' cannot be read" \
        -- bash "$hostfile_run" --hostfile "$tmp/unreadable-hosts" --gpus-per-node 4 05_nccl_mpi
fi

# ---- a real launch, through fake launchers that print what they were given ----
for launcher in srun mpirun; do
    # shellcheck disable=SC2016 # $* and $NCCL_NVLS_ENABLE belong to the fake launcher
    printf '#!/bin/sh\necho "%s $*"\necho "NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE"\n' "$launcher" >"$tmp/fakes/$launcher"
    chmod +x "$tmp/fakes/$launcher"
done
run "${allocation[@]}" FWI_BIN_DIR="$build" PATH="$tmp/fakes:$PATH" -- bash "$cluster/05_nccl_mpi.sbatch" --iterations 2
if [ "$code" -eq 0 ] && [ "$out" = "srun --mpi=pmix --export=ALL --kill-on-bad-exit=1 --cpu-bind=none $build/05_nccl_mpi/05_nccl_mpi --iterations 2
NCCL_NVLS_ENABLE=0" ] && [[ "$err" == *"05_nccl_mpi on 2 node(s) x 4 GPUs, 8 ranks"* ]]; then
    pass "a real launch runs the line it prints, with NCCL_NVLS_ENABLE=0"
else
    fail "a real launch through a fake srun: exit $code, stdout: $out, stderr: $err"
fi
run FWI_BIN_DIR="$build" NCCL_NVLS_ENABLE=1 PATH="$tmp/fakes:$PATH" \
    -- bash "$hostfile_run" --hostfile "$tmp/hosts" --gpus-per-node 4 06_fwi_shot_parallel
if [ "$code" -eq 0 ] && [[ "$out" == "mpirun --hostfile $tmp/hosts -np 8 "*"
NCCL_NVLS_ENABLE=0" ]]; then
    pass "hostfile: a real launch through a fake mpirun, NCCL_NVLS_ENABLE=0"
else
    fail "hostfile: a real launch through a fake mpirun: exit $code, stdout: $out, stderr: $err"
fi

echo
if [ "$failures" -eq 0 ]; then echo "all cases passed"; else echo "$failures case(s) failed"; fi
[ "$failures" -eq 0 ]
