#!/usr/bin/env bash
# The suite's main job, the cross-pattern comparison: builds everything, then runs 01_single_gpu and the
# multi-GPU patterns (03 with each host-staged combine, 04 with both drivers, 05, 06) on the same problem
# for 1, 2, ... up to all visible GPUs, each with --json, and prints one table from their RESULT objects:
# time per gradient, speedup against 01's run beside the scaling model's prediction (scripts/
# scaling_model.py) and the row's biggest loss, the share of an iteration spent combining and the
# gradient rel diff against the single-GPU reference. The model's inputs are measured here too: 01 with
# each GPU count's largest share of the shots, and the allreduce sweeps (02 nccl, 03 per combine, 05)
# around the gradient's size on each GPU count, each allreduce timed alone as the runs time their combine
# (--isolated). The table is also written as text, Markdown, CSV and JSON, with a PNG chart of measured
# and predicted speedup (scripts/compare.py); the machine is described in machine.json (the env object
# of docs/RESULT.md) and machine.txt (nvidia-smi). Another process on the runs' GPUs, before the first
# run or after the last, is a warning and a note under the table (runs/gpu-sharing.txt).
#
# usage: scripts/compare.sh [--problem default|large|small|comm] [--gpus 1,2,4] [--iterations N]
#                           [--reference yes|no] [--run-timeout S] [--out DIR]
#   --problem      the problem every program runs (default: default; large is the scaling problem, comm
#                  the communication-bound one, where a combine through host memory is as long as the
#                  compute)
#   --gpus         the GPU counts to run (default: 1 to all visible, at most the problem's shots: 8 in
#                  default, 4 in comm and small, 32 in large; a count above the shots is refused, exit 2,
#                  once 01's run has said how many there are)
#   --iterations   timed iterations per run, after a warm-up (default: 3)
#   --reference    whether each multi-GPU program also runs its in-process single-GPU reference, which
#                  checks it and gives the grad rel diff column (default: yes; no for --problem large,
#                  where a reference costs several gradients of 2-3 s per run)
#   --run-timeout  seconds after which one run is stopped (default: 300; 1200 for large)
#   --out          output folder: new, empty or an earlier comparison's, and in the repository only under
#                  out/ or a build folder (default: out/compare-PROBLEM); the runs' logs and JSON go to
#                  DIR/runs/
#   (each flag may also be given as --flag=value)
# Without a GPU (nvidia-smi lists none, or where it is not installed, there is no GPU device node) it says so
# in one line and exits 3, before it builds; also exit 3 when CUDA sees none after the build
# (CUDA_VISIBLE_DEVICES, a driver older than the runtime, or no GPU behind device nodes that nvidia-smi is
# not installed to list). Exit 1 when
# any run failed or was not verified.
# DIR/runs is replaced on every comparison, so one the comparison did not make is refused (exit 2), as is a
# DIR that cannot be written.
set -uo pipefail
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/common.sh" || exit 3

bad_flag() { echo "compare: $1" >&2; echo "(scripts/compare.sh --help lists the flags)" >&2; exit 2; }

problem=default gpu_list="" iterations=3 reference="" run_timeout="" out=""
while [ $# -gt 0 ]; do
    # --flag=value is --flag value (for the flags that take one).
    case "$1" in
        --problem=* | --gpus=* | --iterations=* | --reference=* | --run-timeout=* | --out=*)
            set -- "${1%%=*}" "${1#*=}" "${@:2}" ;;
    esac
    case "$1" in
        -h|--help) print_help "${BASH_SOURCE[0]}"; exit 0 ;;
        --problem|--gpus|--iterations|--reference|--run-timeout|--out)
            [ $# -ge 2 ] || bad_flag "$1: missing value"
            first_time "$1" || bad_flag "$1 given twice"
            [ -n "$2" ] || bad_flag "$1: needs a non-empty value"
            [[ "$1" != --out || "$2" != -* ]] ||
                bad_flag "--out: '$2' is a flag, not a folder (a folder whose name starts with - can be given as ./$2)"
            case "$1" in
                --problem) problem="$2" ;;
                --gpus) gpu_list="$2" ;;
                --iterations) iterations="$2" ;;
                --reference) reference="$2" ;;
                --run-timeout) run_timeout="$2" ;;
                --out) out="$2" ;;
            esac
            shift 2 ;;
        *) bad_flag "unknown flag '$1'" ;;
    esac
done
case "$problem" in default|large|small|comm) ;; *) bad_flag "--problem: '$problem' is not one of default|large|small|comm" ;; esac
[[ "$iterations" =~ ^[1-9][0-9]{0,3}$ ]] || bad_flag "--iterations: '$iterations' is not an integer in 1..9999"
[ -n "$reference" ] || { [ "$problem" = large ] && reference=no || reference=yes; }
case "$reference" in yes|no) ;; *) bad_flag "--reference: '$reference' is not one of yes|no" ;; esac
[ -n "$run_timeout" ] || { [ "$problem" = large ] && run_timeout=1200 || run_timeout=300; }
[[ "$run_timeout" =~ ^[1-9][0-9]{0,5}$ ]] || bad_flag "--run-timeout: '$run_timeout' is not an integer in 1..999999"
[[ -z "$gpu_list" || "$gpu_list" =~ ^[1-9][0-9]?(,[1-9][0-9]?)*$ ]] ||
    bad_flag "--gpus: '$gpu_list' is not a comma list of GPU counts like 1,2,4"
repeated="$(repeated_item "$gpu_list")"
[ -z "$repeated" ] || bad_flag "--gpus: $repeated is listed twice"
require_writable_build_folder "$BUILD_DIR"  # a read-only clone: said as that, not as a default --out refused
out="$(realpath -m -- "${out:-$ROOT/out/compare-$problem}")"
runs="$out/runs"
marker="$runs/.made-by-compare"
# Nor the stored results (docs/results), which the docs' figures are made from, but for a new recording's
# own folder, which scripts/record-results.sh names in FWI_RECORDING_INTO.
recording="${FWI_RECORDING_INTO:+$(realpath -m -- "$FWI_RECORDING_INTO")}"
if [[ "$out/" == "$(realpath -m -- "$ROOT/docs/results")/"* && ( -z "$recording" || "$out/" != "$recording/"* ) ]]; then
    bad_flag "--out: '$out' is in docs/results, the stored results the docs' figures are made from; choose another --out"
fi
# Nor a folder of the repository's own files (its root, docs, a lesson).
why="$(repository_folder_reason "$out" docs/results)"  # (docs/results: checked above)
[ -z "$why" ] || bad_flag "--out: $why; choose a folder of the comparison's own (the default is out/compare-PROBLEM)"
# Nor files of the user's: the comparison writes comparison.*, machine.* and runs/ into DIR and empties
# DIR/runs, so a DIR that holds anything must be an earlier comparison's (its marker is there). Checked
# before the build, so a mistake costs nothing.
if [ -d "$out" ] && [ ! -f "$marker" ] && [ -n "$(ls -A -- "$out" 2>/dev/null)" ]; then
    bad_flag "--out: '$out' holds files and was not made by compare.sh (no runs/$(basename "$marker")); the comparison writes comparison.*, machine.* and runs/ there, so choose a new or empty folder"
fi
made_from="$(first_missing_folder "$out")"
why="$(unwritable_folder_reason "$out")"
[ -z "$why" ] || bad_flag "--out: $why"
# The folders that check made, while still empty, go again however the script ends before the runs write
# there (no GPU, no python3, a failed build, Ctrl-C or SIGTERM during it).
trap 'remove_made_folders "$out" "$made_from"' EXIT
no_gpu() {
    echo "compare: no CUDA GPU visible ($1); the comparison needs at least one (the tests run without: scripts/run-tests.sh)" >&2
    exit 3
}
# Without a GPU there is nothing to compare: said before the build, which would take minutes for nothing.
# Where nvidia-smi is not installed (a container without NVIDIA's utility capability), CUDA may still see
# GPUs where their device nodes are: CUDA's count after the build decides.
have_nvidia_smi=yes
command -v nvidia-smi >/dev/null 2>&1 || have_nvidia_smi=no
if [ "$have_nvidia_smi" = yes ]; then
    quick_query nvidia-smi -L >/dev/null 2>&1 || no_gpu "nvidia-smi -L fails or does not answer"
else
    gpu_device_nodes_present ||
        no_gpu "nvidia-smi is not installed, and there is no GPU device node such as ${FWI_DEV_DIR:-/dev}/nvidia0"
    echo "compare: nvidia-smi is not installed: whether CUDA sees a GPU is known after the build" >&2
fi
# Set but empty, CUDA_VISIBLE_DEVICES hides every GPU from CUDA, whatever nvidia-smi lists.
[ "${CUDA_VISIBLE_DEVICES-unset}" != "" ] || no_gpu "CUDA_VISIBLE_DEVICES is set and empty, which hides every GPU"

configure_and_build default || exit $?
# The table and the scaling model's inputs are read with python3: checked before the runs, not after them.
python="$(python3_path)"
if [ -z "$python" ]; then
    echo "compare: no python3 that runs (none on PATH or at /usr/bin/python3), and scripts/compare.py makes the" \
         "table with it; install python3 (apt-get install python3-matplotlib) or put it on PATH, and run again" >&2
    exit 3
fi
bin="$BUILD_DIR"
cd "$ROOT"

# The GPUs the programs will see, counted the way they count them (common/visible_gpus): CUDA_VISIBLE_DEVICES
# may hide the GPUs nvidia-smi lists, or the driver be too old for the CUDA runtime.
visible=$(count_visible_gpus "$bin/common/visible_gpus") || { echo "compare: is the build broken?" >&2; exit 3; }
[ "$visible" -gt 0 ] || no_gpu "to CUDA: check nvidia-smi and CUDA_VISIBLE_DEVICES"
if [ -z "$gpu_list" ]; then
    gpu_counts=$(seq -s " " 1 "$visible")
else
    gpu_counts=$(tr ',' ' ' <<<"$gpu_list")
    for n in $gpu_counts; do
        [ "$n" -le "$visible" ] || bad_flag "--gpus: $n GPUs asked for, $visible visible"
    done
fi

rm -rf "$runs"  # ours (checked above): the runs of an earlier comparison
# And its results, so that a comparison stopped half-way leaves none that look like this one's; and its
# machine's description, which this one writes again (where it cannot, none is better than another's).
rm -f "$out"/comparison.{txt,md,csv,json,png} "$out/machine.json"
mkdir -p "$runs"
echo "made by scripts/compare.sh: the next comparison with this --out deletes this folder" >"$marker"
# Until the last run is done: compare.py refuses a folder that has it, so that a comparison stopped half-way
# is not read later as a complete one with fewer rows.
echo "scripts/compare.sh has not finished this comparison" >"$runs/unfinished"
# The machine files replace an earlier comparison's whole: written under a temporary name, then renamed
# (as every file the suite writes), so a stopped comparison never leaves a torn one.
{
    echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
    echo "CUDA_VISIBLE_DEVICES: ${CUDA_VISIBLE_DEVICES-(unset: every GPU)}"
    echo "every GPU of the machine (nvidia-smi, which ignores CUDA_VISIBLE_DEVICES; machine.json has the ones used):"
    [ "$have_nvidia_smi" = yes ] || echo "(nvidia-smi is not installed)"
    [ "$have_nvidia_smi" = no ] || quick_query nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader
    nvcc --version | tail -n 1
    quick_query mpirun --version 2>&1 | head -n 1
    [ "$have_nvidia_smi" = no ] || quick_query nvidia-smi topo -m
} >"$out/machine.txt.tmp.$$" 2>&1
mv -f "$out/machine.txt.tmp.$$" "$out/machine.txt"
models=""
if quick_query "$bin/common/visible_gpus" --env-json >"$out/machine.json.tmp.$$"; then
    mv -f "$out/machine.json.tmp.$$" "$out/machine.json"
    # The GPUs the runs use, as CUDA sees them (CUDA_VISIBLE_DEVICES counts): "4 x NVIDIA H100 80GB HBM3".
    models=$(grep -o '"name": "[^"]*"' "$out/machine.json" | sed 's/^"name": "//; s/"$//' | sort | uniq -c |
             sed 's/^ *\([0-9]*\) /\1 x /' | paste -sd ';' | sed 's/;/, /g')
else
    rm -f "$out/machine.json.tmp.$$"  # ours, just made
    echo "compare: warning: visible_gpus --env-json failed, so no new machine.json" >&2
fi
printf 'role\tpattern\tvariant\tgpus\tstatus\tjson\tlog\n' >"$runs/manifest.tsv"
echo "compare: problem $problem, GPU counts $gpu_counts, $iterations iterations per run, reference: $reference"
echo "compare: ${models:-$visible GPUs}; logs and RESULT files in $runs/"
if [[ $models == *,* ]]; then
    echo "compare: warning: the GPUs are not all one model; the single-GPU runs (01 and the scaling model's" \
         "figures) use the first, and every multi-GPU run goes at the pace of its slowest GPU; to compare on" \
         "identical GPUs, name them in CUDA_VISIBLE_DEVICES (by UUID from nvidia-smi -L, or by number with" \
         "CUDA_DEVICE_ORDER=PCI_BUS_ID, which numbers them as nvidia-smi does; CUDA's own order puts the" \
         "fastest first)" >&2
fi

# Another process on the runs' GPUs shares them with every run: its times are slower and vary, and the
# comparison measures the patterns under a load it does not control. Looked for (visible_gpus asks NVML,
# as doctor's check 1 does) before the first run and after the last, when none of the comparison's own
# processes is alive; what is seen goes into runs/gpu-sharing.txt, which compare.py notes under the table.
sharing="$runs/gpu-sharing.txt"
# note_gpu_sharing WHEN: warns of the other processes on the GPUs now, and writes them down.
note_gpu_sharing() {
    local users
    users="$(quick_query "$bin/common/visible_gpus" --other-processes)" ||
        echo "compare: warning: whether other processes use the GPUs $1 is not known (visible_gpus, above)" >&2
    [ -n "$users" ] || return 0
    { echo "other processes on the runs' GPUs $1:"; sed 's/^/  /' <<<"$users"; } | tee -a "$sharing" |
        sed '1s/^/compare: warning: /' >&2
    echo "compare: warning: they share the GPUs with the runs, so if they compute, the times are slower and" \
         "vary; let them finish or stop them, or choose idle GPUs with CUDA_VISIBLE_DEVICES" >&2
}
note_gpu_sharing "before the first run"

# One rank per GPU, started as common.sh's mpi_launcher says.
mapfile -t mpi_launch < <(mpi_launcher)
common_flags=(--problem "$problem" --iterations "$iterations")
reference_flags=()
[ "$reference" = no ] && reference_flags=(--no-reference)

# run_one ROLE PATTERN VARIANT GPUS mpi|direct PROGRAM ARGS...: one run under the timeout, recorded in the
# manifest with its exit status ("timeout" when stopped, "not-built" when the program is missing). ROLE:
# fwi (a row of the table), batch or sweep (an input of the scaling model).
run_one() {
    local role="$1" pattern="$2" variant="$3" gpus="$4" launch="$5" program="$6"
    shift 6
    local name="$pattern${variant:+-$variant}-${gpus}gpu"
    [ "$role" = fwi ] || name="$role-$name"
    local status line
    printf '%-5s %-22s %-10s %d GPU(s): ' "$role" "$pattern" "${variant:--}" "$gpus"
    if [ ! -x "$program" ]; then
        status=not-built
        line="not built ($program)"
    else
        local command=("$program" "$@" --json "$runs/$name.json")
        [ "$launch" = mpi ] && command=("${mpi_launch[@]}" -np "$gpus" "${command[@]}")
        echo "\$ ${command[*]}" >"$runs/$name.log"
        local start=$SECONDS
        run_with_timeout "$run_timeout" "${command[@]}" >>"$runs/$name.log" 2>&1
        status=$?
        case $status in
            0) line="$(grep -E 'speedup:|per gradient|Avg bus bandwidth' "$runs/$name.log" | tail -n 1)" ;;
            124) status=timeout ;;
            137) [ $((SECONDS - start)) -ge "$run_timeout" ] && status=timeout ;;  # killed after the grace
        esac
        case $status in
            0) ;;
            timeout) line="TIMEOUT after $run_timeout s" ;;
            *) line="FAILED (exit $status): $(grep -v '^RESULT' "$runs/$name.log" | grep -E 'error|FAILED|environment' | head -n 1)" ;;
        esac
        line="$line [$((SECONDS - start)) s]"
    fi
    echo "$line"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$role" "$pattern" "$variant" "$gpus" "$status" "$name.json" \
        "$name.log" >>"$runs/manifest.tsv"
}

run_one fwi 01_single_gpu "" 1 direct "$bin/01_single_gpu/01_single_gpu" "${common_flags[@]}" --out "$runs/01_single_gpu"
# The problem's shots and gradient bytes, from 01's RESULT: they bound the GPU counts and size the scaling
# model's inputs.
result_field() { "$python" -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$2" "$1" 2>/dev/null; }
shots=$(result_field shots "$runs/01_single_gpu-1gpu.json")
gradient_bytes=$(result_field gradient_bytes "$runs/01_single_gpu-1gpu.json")
# Every program refuses more GPUs than shots (exit 2: a GPU would have nothing to do), so the GPU counts stop
# at the shots: the default counts are cut there, and a count asked for above them is a bad --gpus.
if [[ "$shots" =~ ^[1-9][0-9]{0,5}$ ]]; then
    kept=""
    for n in $gpu_counts; do
        [ "$n" -le "$shots" ] && kept+="${kept:+ }$n"
    done
    if [ "$kept" != "$gpu_counts" ]; then
        [ -z "$gpu_list" ] ||
            bad_flag "--gpus: the $problem problem has $shots shots, and every program refuses more GPUs than shots; list counts up to $shots"
        echo "compare: the $problem problem has $shots shots, so the GPU counts stop at $shots: $kept"
        gpu_counts="$kept"
    fi
fi
for variant in pageable pinned pipelined; do
    for n in $gpu_counts; do
        run_one fwi 03_host_staged_mpi "$variant" "$n" mpi "$bin/03_host_staged_mpi/03_host_staged_mpi" \
            "${common_flags[@]}" "${reference_flags[@]}" --combine "$variant"
    done
done
for driver in threads group; do
    for n in $gpu_counts; do
        run_one fwi 04_nccl_threads "$driver" "$n" direct "$bin/04_nccl_threads/04_nccl_threads" \
            "${common_flags[@]}" "${reference_flags[@]}" --gpus "$n" --driver "$driver"
    done
done
for n in $gpu_counts; do
    run_one fwi 05_nccl_mpi "" "$n" mpi "$bin/05_nccl_mpi/05_nccl_mpi" "${common_flags[@]}" "${reference_flags[@]}"
done
for n in $gpu_counts; do
    run_one fwi 06_fwi_shot_parallel "" "$n" mpi "$bin/06_fwi_shot_parallel/06_fwi_shot_parallel" \
        "${common_flags[@]}" "${reference_flags[@]}" --no-plots --save-every 0 --out "$runs/06_fwi_shot_parallel-${n}gpu"
done

# The scaling model's inputs (scripts/scaling_model.py), from the problem's shots and gradient bytes
# (01's RESULT, above). Compute: 01 with the largest share of the shots of each GPU count (ceil(shots / N),
# as split_shots gives out). Combine: every allreduce sweep the model maps a pattern to, on each GPU count,
# from G/8 to 2G doubling (G: the gradient's bytes).
if [ -z "$shots" ] && [ -z "$gradient_bytes" ]; then
    echo "compare: 01_single_gpu left no RESULT, so the scaling model's inputs are not measured"
elif ! [[ "$shots" =~ ^[1-9][0-9]{0,5}$ && "$gradient_bytes" =~ ^[1-9][0-9]{0,14}$ ]]; then
    # Checked before the arithmetic below: a null (None here) would end the script there.
    echo "compare: 01_single_gpu's RESULT gives shots '$shots' and gradient_bytes '$gradient_bytes', not positive" \
         "integers, so the scaling model's inputs are not measured"
else
    # 2 warm-up calls and 5 batches of 5 (the lessons' sweeps: 5 and 20): the model needs one time per size,
    # and a 03 sweep of a 64 MiB gradient through host memory would otherwise take a minute per GPU count.
    # --isolated: each allreduce timed alone, from its call to the end of its wait, as the runs time their
    # combine phase (a batch back to back hides the call's issue and the wait's notice behind the calls
    # before it).
    sweep_flags=(-b $((gradient_bytes / 8)) -e $((gradient_bytes * 2)) -f 2 -w 2 -n 5 --isolated)
    measured_shares=" $shots "  # 01's own run measured all the shots
    for n in $gpu_counts; do
        share=$(( (shots + n - 1) / n ))
        [[ "$measured_shares" == *" $share "* ]] && continue
        measured_shares+="$share "
        run_one batch 01_single_gpu "${share}-shots" 1 direct "$bin/01_single_gpu/01_single_gpu" \
            "${common_flags[@]}" --nshots "$share" --out "$runs/01_single_gpu-${share}-shots"
    done
    for n in $gpu_counts; do
        # 02 takes at most 8 GPUs; beyond, the model takes 04's combine from 05's sweep (scaling_model.py).
        [ "$n" -gt 8 ] || run_one sweep 02_allreduce_primitives nccl "$n" direct \
            "$bin/02_allreduce_primitives/02_allreduce_primitives" --variants nccl -g "$n" "${sweep_flags[@]}"
        for variant in pageable pinned pipelined; do
            run_one sweep 03_host_staged_mpi "$variant" "$n" mpi "$bin/03_host_staged_mpi/03_host_staged_mpi" \
                --bench-allreduce --combine "$variant" "${sweep_flags[@]}"
        done
        run_one sweep 05_nccl_mpi nccl "$n" mpi "$bin/05_nccl_mpi/05_nccl_mpi" --bench-allreduce "${sweep_flags[@]}"
    done
fi

note_gpu_sharing "after the last run"
rm -f "$runs/unfinished"

echo
# The table and chart take seconds; a limit all the same (a plotting library that hangs on a display).
run_within 600 "$python" "$ROOT/scripts/compare.py" "$out"
