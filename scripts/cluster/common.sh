# Sourced by the launch recipes in this folder (the *.sbatch scripts and hostfile-run.sh): where the
# built programs are, what every rank's environment holds, and the launch line, run or only printed (a
# dry run). README.md, "Across nodes", explains the recipes.
# shellcheck shell=bash

FWI_REPO="${FWI_REPO:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
# NVLink multicast (NVLS) stays off in everything this suite starts.
export NCCL_NVLS_ENABLE=0
# The C locale, as in scripts/common.sh: the checks of counts and names read [0-9] and [A-Za-z] as ASCII
# (in other locales a bracket range also takes "²" or "ï").
export LC_ALL=C

# The programs that run one MPI rank per GPU (doctor with --mpi); hostfile-run.sh starts any of them.
# shellcheck disable=SC2034
FWI_CLUSTER_PROGRAMS=(03_host_staged_mpi 05_nccl_mpi 06_fwi_shot_parallel doctor)

# fwi_die CODE MESSAGE: the suite's exit codes: 2 bad input, 3 environment.
fwi_die() {
    local code=$1
    shift
    echo "${FWI_RECIPE:-scripts/cluster}: $*" >&2
    exit "$code"
}

# fwi_help COMMAND...: runs COMMAND, which writes --help's text, and ends the script: exit 0, also where the
# reader stopped early (a closed pipe: it took what it wanted); 3 where the text could not be written (closed,
# a full disk).
fwi_help() {
    local written=0 why=""  # (`why` stays unset where fd 1 is closed and the redirection itself fails)
    # COMMAND's own error in `why` (stdout goes through fd 3): "Broken pipe" where SIGPIPE is ignored (in
    # English: LC_ALL=C).
    { why="$(LC_ALL=C "$@" 2>&1 >&3 3>&-)"; } 3>&1 || written=$?
    if [ "$written" -eq 0 ] || [ "$written" -eq 141 ] || [[ $why == *"Broken pipe"* ]]; then exit 0; fi
    fwi_die 3 "--help: cannot write the help text to standard output"
}

# fwi_dry_run: whether FWI_DRY_RUN (or --dry-run) asks for a dry run: 1 yes, unset, empty or 0 no; any other
# value is refused (a "true" or "yes" read as "no" would launch the job for real).
fwi_dry_run() {
    case "${FWI_DRY_RUN:-0}" in
        1) return 0 ;;
        0) return 1 ;;
        *) fwi_die 2 "FWI_DRY_RUN: '$FWI_DRY_RUN' is not 1 (print the launch line only) or 0 (run it)" ;;
    esac
}

# fwi_is_one_of ITEM CHOICE...: whether ITEM is exactly one of the CHOICEs (not a run of them with spaces).
fwi_is_one_of() {
    local item="$1" choice
    shift
    for choice in "$@"; do [ "$item" = "$choice" ] && return 0; done
    return 1
}

# A node, GPU or rank count: 1..999999 (a longer number is no real count, and would overflow the shell's
# arithmetic when multiplied).
fwi_positive_integer() { [[ "$1" =~ ^[1-9][0-9]{0,5}$ ]]; }

# --bin-dir given twice is refused, as the programs refuse a repeated flag, also across calls of
# fwi_recipe_options (hostfile-run.sh calls it again for a --bin-dir among its own options).
FWI_BIN_DIR_GIVEN=""

# fwi_recipe_options ARGS...: the recipe's own options, before the program's arguments: --dry-run (or
# FWI_DRY_RUN=1: print the launch line instead of running it), --bin-dir DIR (or FWI_BIN_DIR), and `--`
# to end them. What is left is in FWI_ARGS.
fwi_recipe_options() {
    FWI_ARGS=()
    while [ $# -gt 0 ]; do
        case "$1" in
            --dry-run) FWI_DRY_RUN=1; shift ;;
            --bin-dir | --bin-dir=*)
                [ -z "$FWI_BIN_DIR_GIVEN" ] || fwi_die 2 "--bin-dir given twice"
                FWI_BIN_DIR_GIVEN=yes
                if [ "$1" = --bin-dir ]; then
                    [ $# -ge 2 ] || fwi_die 2 "--bin-dir: missing value (a build folder or an install's bin folder)"
                    FWI_BIN_DIR="$2"
                    shift 2
                else
                    FWI_BIN_DIR="${1#--bin-dir=}"
                    shift
                fi
                [ -n "$FWI_BIN_DIR" ] || fwi_die 2 "--bin-dir: needs a non-empty value (a build folder or an install's bin folder)"
                ;;
            --) shift; break ;;
            *) break ;;
        esac
    done
    FWI_ARGS=("$@")
    fwi_dry_run || true  # refuses a value other than 0 or 1 before anything else is checked
}

# fwi_program_path NAME: the absolute path of a built program: NAME/NAME in a build folder or NAME in an
# install's bin folder (cmake --install), from FWI_BIN_DIR, else the repository's build folder (the
# default preset's). Ranks on other nodes start the same path, so it has to hold the same program there.
fwi_program_path() {
    local name=$1 dir candidate
    dir="${FWI_BIN_DIR:-$FWI_REPO/build}"
    if [ -n "${FWI_BIN_DIR:-}" ] && [ ! -d "$FWI_BIN_DIR" ]; then
        fwi_die 2 "--bin-dir (FWI_BIN_DIR): '$FWI_BIN_DIR' is not a folder"
    fi
    for candidate in "$dir/$name/$name" "$dir/$name"; do
        if [ -f "$candidate" ] && [ -x "$candidate" ]; then
            echo "$(cd "$(dirname "$candidate")" && pwd)/$name"
            return
        fi
    done
    fwi_die 3 "no built $name in $dir (looked for $dir/$name/$name and $dir/$name): build it (cmake --preset" \
        "default && cmake --build --preset default), or name the build folder or install's bin with --bin-dir" \
        "or FWI_BIN_DIR"
}

# fwi_mpirun_exports [hostfile]: the -x flags of mpirun into FWI_EXPORTS: the multicast setting, PATH and
# LD_LIBRARY_PATH (where the remote ranks find the same CUDA, NCCL and MPI), and every NCCL_*, UCX_* and
# FI_* variable set here (NCCL_SOCKET_IFNAME, NCCL_IB_HCA, NCCL_DEBUG, ...; UCX_NET_DEVICES, UCX_TLS and
# libfabric's FI_PROVIDER steer MPI's own traffic, which both ends must agree on). With "hostfile" also
# CUDA_VISIBLE_DEVICES when it is set: without a scheduler to set it on each node, the GPUs it names here
# are the ones every node uses. mpirun hands its own environment only to the ranks on its own node; srun
# hands it to all.
fwi_mpirun_exports() {
    local name
    FWI_EXPORTS=(-x NCCL_NVLS_ENABLE=0 -x PATH)
    [ -n "${LD_LIBRARY_PATH:-}" ] && FWI_EXPORTS+=(-x LD_LIBRARY_PATH)
    [ "${1:-}" = hostfile ] && [ -n "${CUDA_VISIBLE_DEVICES+set}" ] && FWI_EXPORTS+=(-x CUDA_VISIBLE_DEVICES)
    while read -r name; do
        [ "$name" = NCCL_NVLS_ENABLE ] || FWI_EXPORTS+=(-x "$name")
    done < <(compgen -e | grep -E '^(NCCL|UCX|FI)_' | LC_ALL=C sort)
}

# fwi_mpirun_line RANKS GPUS_PER_NODE [HOSTFILE]: into FWI_LINE, the mpirun line that starts RANKS ranks,
# GPUS_PER_NODE on each node (one per GPU), before the program. FWI_MPIRUN names the mpirun (default:
# the one on PATH); FWI_MPIRUN_FLAGS adds flags of your own (--prefix /opt/openmpi, --mca ...), split at
# white space without shell quoting, so none of them can hold a space.
fwi_mpirun_line() {
    local ranks=$1 gpus=$2 hostfile=${3:-} extra=()
    fwi_mpirun_exports ${hostfile:+hostfile}
    read -r -a extra <<<"${FWI_MPIRUN_FLAGS:-}"
    FWI_LINE=("${FWI_MPIRUN:-mpirun}")
    [ -n "$hostfile" ] && FWI_LINE+=(--hostfile "$hostfile")
    FWI_LINE+=(-np "$ranks" --map-by "ppr:$gpus:node" --bind-to none "${FWI_EXPORTS[@]}" "${extra[@]}")
}

# fwi_launch COMMAND...: prints the command (shell-quoted, one line) and runs it in place of this shell;
# with FWI_DRY_RUN=1 (or --dry-run) only prints it, on stdout, and exits 0.
fwi_launch() {
    local line
    line="$(printf '%q ' "$@")"
    line="${line% }"
    if fwi_dry_run; then
        # The line is what a dry run is for: one that could not be written (stdout closed, a full disk) is no success.
        echo "$line" 2>/dev/null || fwi_die 3 "the launch line could not be written to standard output (closed, or" \
            "on a full disk): $line"
        exit 0
    fi
    # exec would end the script with the shell's own "not found" (exit 127): say what to fix instead.
    local other="name Open MPI's mpirun with FWI_MPIRUN"
    [ "$(basename -- "$1")" = srun ] && other="launch with Open MPI's mpirun instead: FWI_LAUNCHER=mpirun"
    command -v -- "$1" >/dev/null 2>&1 ||
        fwi_die 3 "cannot start the launcher '$1': no such program (not on PATH, or not executable); load the" \
            "MPI or Slurm that provides it (module load ...), or $other"
    echo "${FWI_RECIPE:-scripts/cluster}: $line" >&2
    exec "$@"
}

# fwi_sbatch_option FILE NAME: the value of `#SBATCH --NAME=VALUE` in FILE ("" when absent).
fwi_sbatch_option() {
    sed -n "s/^#SBATCH --$2=\\([^[:space:]]*\\).*/\\1/p" "$1" | head -n 1
}

# fwi_slurm_run SCRIPT PROGRAM ARGS...: the body of every *.sbatch recipe. Inside the allocation, one rank
# per GPU: srun --mpi=pmix (FWI_SRUN_MPI names another PMI: pmi2), or with FWI_LAUNCHER=mpirun Open
# MPI's mpirun, which reads the nodes from Slurm. Outside an allocation only a dry run works; it takes the
# counts from SCRIPT's #SBATCH lines.
fwi_slurm_run() {
    local script=$1 program=$2 nodes tasks_per_node gpus_per_node cpus_per_task ranks path gpus_flag=--gpus-per-node=
    shift 2
    FWI_RECIPE="${FWI_RECIPE:-$(basename "$script")}"
    fwi_recipe_options "$@"
    if [ -n "${SLURM_JOB_ID:-}" ]; then
        nodes="${SLURM_JOB_NUM_NODES:-${SLURM_NNODES:-}}"
        tasks_per_node="${SLURM_NTASKS_PER_NODE:-}"
        gpus_per_node="${SLURM_GPUS_PER_NODE:-}"
        # A job given its GPUs with --gres=gpu:N (older clusters' way) has no SLURM_GPUS_PER_NODE: the GPUs
        # given on this node, as a count or as their list.
        if [ -z "$gpus_per_node" ] && [ -n "${SLURM_GPUS_ON_NODE:-}" ]; then
            gpus_per_node="$SLURM_GPUS_ON_NODE" gpus_flag=--gres=gpu:
        elif [ -z "$gpus_per_node" ] && [ -n "${SLURM_JOB_GPUS:-}" ]; then
            gpus_per_node="$(tr ',' '\n' <<<"$SLURM_JOB_GPUS" | grep -c .)" gpus_flag=--gres=gpu:
        fi
        ranks="${SLURM_NTASKS:-}"
        cpus_per_task="${SLURM_CPUS_PER_TASK:-}"
    elif fwi_dry_run; then
        nodes="$(fwi_sbatch_option "$script" nodes)"
        tasks_per_node="$(fwi_sbatch_option "$script" ntasks-per-node)"
        gpus_per_node="$(fwi_sbatch_option "$script" gpus-per-node)"
        cpus_per_task="$(fwi_sbatch_option "$script" cpus-per-task)"
        ranks=""
    elif [ "${FWI_ARGS[0]:-}" = --help ] || [ "${FWI_ARGS[0]:-}" = -h ]; then
        # Outside a job, --help is the recipe's (inside one it goes to the program): its header comment.
        fwi_help awk 'NR > 1 && !/^#/ { exit } NR > 1 && !/^#SBATCH/ { sub(/^# ?/, ""); if (shown || $0 != "") { shown = 1; print } }' \
            "$script"
    else
        fwi_die 2 "not inside a Slurm job (no SLURM_JOB_ID): submit it, sbatch $script [ARGS...]; print its" \
            "launch line with --dry-run; without Slurm, use scripts/cluster/hostfile-run.sh"
    fi
    [[ "$gpus_per_node" != *,* ]] ||
        fwi_die 2 "--gpus-per-node: '$gpus_per_node' names several kinds of GPU; these recipes run one task per" \
            "GPU of one kind: give one count (--gpus-per-node=4 or =h100:4), equal to --ntasks-per-node"
    gpus_per_node="${gpus_per_node##*:}" # "h100:4" -> 4
    fwi_positive_integer "$nodes" || fwi_die 2 "--nodes: '$nodes' is not a node count (1..999999)"
    fwi_positive_integer "$tasks_per_node" ||
        fwi_die 2 "--ntasks-per-node: '$tasks_per_node' is not a count (1..999999); give it, equal to --gpus-per-node"
    fwi_positive_integer "$gpus_per_node" ||
        fwi_die 2 "--gpus-per-node: '$gpus_per_node' is not a count (1..999999); give it (or --gres=gpu:N), equal to --ntasks-per-node"
    [ "$tasks_per_node" = "$gpus_per_node" ] ||
        fwi_die 2 "--ntasks-per-node=$tasks_per_node with $gpus_flag$gpus_per_node: these recipes run one" \
            "task per GPU, so give both the same value"
    ranks="${ranks:-$((nodes * tasks_per_node))}"
    # SLURM_NTASKS: what mpirun's -np gets (FWI_LAUNCHER=mpirun), so checked as the counts above are.
    fwi_positive_integer "$ranks" || fwi_die 2 "--ntasks (SLURM_NTASKS): '$ranks' is not a count (1..999999)"
    [ -z "$cpus_per_task" ] || fwi_positive_integer "$cpus_per_task" ||
        fwi_die 2 "--cpus-per-task: '$cpus_per_task' is not a count (1..999999)"
    [ "$ranks" -le $((nodes * tasks_per_node)) ] ||
        fwi_die 2 "--ntasks (SLURM_NTASKS): $ranks ranks do not fit $nodes node(s) x $tasks_per_node tasks (one rank" \
            "per GPU); at most $((nodes * tasks_per_node))"
    path="$(fwi_program_path "$program")" || exit
    case "${FWI_LAUNCHER:-srun}" in
        srun)
            [[ "${FWI_SRUN_MPI:-pmix}" =~ ^[A-Za-z0-9_]{1,32}$ ]] ||
                fwi_die 2 "FWI_SRUN_MPI: '$FWI_SRUN_MPI' is not the name of a Slurm MPI plugin like pmix or pmi2" \
                    "(srun --mpi=list shows those of this cluster)"
            # Each task's CPUs float over those the job has, as mpirun's --bind-to none lets them; the job's
            # --cpus-per-task is handed on explicitly, as some Slurm versions do not pass it to srun.
            # --export=ALL: a job submitted with --export=NONE (or SLURM_EXPORT_ENV) would otherwise start the
            # tasks without this script's environment (NCCL_NVLS_ENABLE=0, PATH, LD_LIBRARY_PATH).
            FWI_LINE=(srun "--mpi=${FWI_SRUN_MPI:-pmix}" --export=ALL --kill-on-bad-exit=1 --cpu-bind=none)
            [ -n "$cpus_per_task" ] && FWI_LINE+=("--cpus-per-task=$cpus_per_task") ;;
        mpirun) fwi_mpirun_line "$ranks" "$gpus_per_node" ;;
        *) fwi_die 2 "FWI_LAUNCHER: '$FWI_LAUNCHER' is not one of srun|mpirun" ;;
    esac
    fwi_dry_run ||
        echo "$FWI_RECIPE: $program on $nodes node(s) x $gpus_per_node GPUs, $ranks ranks, one per GPU" >&2
    fwi_launch "${FWI_LINE[@]}" "$path" "${FWI_ARGS[@]}"
}
