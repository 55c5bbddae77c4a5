#!/usr/bin/env bash
# Starts one of the suite's MPI programs on the nodes of a hostfile with Open MPI's mpirun, one rank per
# GPU, without a scheduler:
#
#   scripts/cluster/hostfile-run.sh [--dry-run] [--bin-dir DIR] --hostfile HOSTS --gpus-per-node G [--np N]
#                                   [--] PROGRAM [ARGS...]
#
#   PROGRAM   03_host_staged_mpi, 05_nccl_mpi, 06_fwi_shot_parallel or doctor (give doctor --mpi); ARGS go
#             to it
#   HOSTS     Open MPI's hostfile: one node a line ("node1 slots=4"); blank lines and # comments are skipped
#   G         GPUs per node: G ranks on every node (--map-by ppr:G:node)
#   N         ranks in all (default: the hostfile's nodes times G)
#   --dry-run print the mpirun line instead of running it (or FWI_DRY_RUN=1)
#   --bin-dir the build folder or an install's bin (or FWI_BIN_DIR; default: the repository's build/),
#             at the same path on every node
#   (each option that takes a value may also be given as --option=value)
#
# The line it runs, e.g. for two 4-GPU nodes with NCCL_SOCKET_IFNAME set:
#
#   mpirun --hostfile hosts -np 8 --map-by ppr:4:node --bind-to none -x NCCL_NVLS_ENABLE=0 -x PATH \
#          -x LD_LIBRARY_PATH -x NCCL_SOCKET_IFNAME <repo>/build/05_nccl_mpi/05_nccl_mpi --bench-allreduce
#
# -x hands the ranks on the other nodes PATH, LD_LIBRARY_PATH and CUDA_VISIBLE_DEVICES (each only when
# set; CUDA_VISIBLE_DEVICES must then name at least G GPUs) and every NCCL_*, UCX_* and FI_* variable set
# here (NCCL_SOCKET_IFNAME, NCCL_IB_HCA, NCCL_DEBUG, UCX_NET_DEVICES, ...); mpirun gives its environment
# only to the ranks on its own node. FWI_MPIRUN names another mpirun, FWI_MPIRUN_FLAGS adds flags
# (--prefix /opt/openmpi where Open MPI is not on the remote nodes' default PATH). README.md, "Across
# nodes", says more.
set -uo pipefail
FWI_RECIPE="hostfile-run.sh"
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/common.sh" || exit 3

usage() { fwi_help sed -n '2,/^[^#]/s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; }

hostfile="" gpus_per_node="" ranks="" given=""
fwi_recipe_options "$@"
set -- "${FWI_ARGS[@]}"
while [ $# -gt 0 ]; do
    # --option=value is --option value (for the options that take one; --bin-dir= is read below).
    case "$1" in --hostfile=* | --gpus-per-node=* | --np=*) set -- "${1%%=*}" "${1#*=}" "${@:2}" ;; esac
    case "$1" in
        --hostfile | --gpus-per-node | --np)
            [ $# -ge 2 ] || fwi_die 2 "$1: missing value"
            [ -n "$2" ] || fwi_die 2 "$1: needs a non-empty value"
            [[ " $given " != *" $1 "* ]] || fwi_die 2 "$1 given twice"
            given+=" $1"
            case "$1" in
                --hostfile) hostfile="$2" ;;
                --gpus-per-node) gpus_per_node="$2" ;;
                --np) ranks="$2" ;;
            esac
            shift 2
            ;;
        --dry-run | --bin-dir | --bin-dir=*) fwi_recipe_options "$@"; set -- "${FWI_ARGS[@]}" ;;
        -h | --help) usage ;;
        --) shift; break ;;  # the end of the options: PROGRAM follows
        -*) fwi_die 2 "unknown option '$1' (before PROGRAM: --hostfile, --gpus-per-node, --np, --dry-run, --bin-dir)" ;;
        *) break ;;
    esac
done
[ $# -ge 1 ] || fwi_die 2 "no PROGRAM; one of ${FWI_CLUSTER_PROGRAMS[*]} (--help shows the usage)"
program=$1
shift
fwi_is_one_of "$program" "${FWI_CLUSTER_PROGRAMS[@]}" ||
    fwi_die 2 "PROGRAM: '$program' is not one of ${FWI_CLUSTER_PROGRAMS[*]}"
[ -n "$hostfile" ] || fwi_die 2 "--hostfile: missing; a file with one node a line (node1 slots=4)"
[ -f "$hostfile" ] || fwi_die 2 "--hostfile: '$hostfile' is not a file"
[ -r "$hostfile" ] || fwi_die 2 "--hostfile: '$hostfile' cannot be read"
[ -n "$gpus_per_node" ] || fwi_die 2 "--gpus-per-node: missing; the GPUs of each node, one rank on each"
fwi_positive_integer "$gpus_per_node" || fwi_die 2 "--gpus-per-node: '$gpus_per_node' is not a count (1..999999)"
# CUDA_VISIBLE_DEVICES goes to every node (fwi_mpirun_exports): it must name a GPU for each rank of a node.
if [ -n "${CUDA_VISIBLE_DEVICES+set}" ]; then
    IFS=, read -r -a listed <<<"$CUDA_VISIBLE_DEVICES"
    [ "${#listed[@]}" -ge "$gpus_per_node" ] ||
        fwi_die 2 "CUDA_VISIBLE_DEVICES='$CUDA_VISIBLE_DEVICES' names ${#listed[@]} GPU(s), fewer than --gpus-per-node" \
            "$gpus_per_node, and it is handed to every node; name $gpus_per_node GPUs, or unset it"
fi
# Nodes, not lines: mpirun reads a node named twice as one, with the slots of both lines.
nodes=$(grep -vE '^[[:space:]]*(#|$)' "$hostfile" | awk '{print $1}' | sort -u | wc -l)
[ "$nodes" -gt 0 ] || fwi_die 2 "--hostfile: '$hostfile' names no node"
ranks="${ranks:-$((nodes * gpus_per_node))}"
fwi_positive_integer "$ranks" || fwi_die 2 "--np: '$ranks' is not a count (1..999999)"
[ "$ranks" -le $((nodes * gpus_per_node)) ] ||
    fwi_die 2 "--np: $ranks ranks do not fit $nodes node(s) x $gpus_per_node GPUs (one rank per GPU); at most" \
        "$((nodes * gpus_per_node))"

path="$(fwi_program_path "$program")" || exit
fwi_mpirun_line "$ranks" "$gpus_per_node" "$hostfile"
fwi_launch "${FWI_LINE[@]}" "$path" "$@"
