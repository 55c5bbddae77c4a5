#!/usr/bin/env bash
# Records one machine's measured results, the files the figures in the docs come from: the build's wall
# time, each lesson's default run on the GPUs present, the comparison on the default and the comm problem
# (scripts/compare.sh, with its scaling-model inputs), 05 and 06 with NCCL forced onto its network
# transport beside NVLink/PCIe, doctor, the measurements the lessons' exercises ask for (the answers
# in docs/ANSWERS.md cite them), and the scaling problem (--problem large) on every GPU. Every program
# writes its RESULT (--json) and its output (.log); timings.tsv holds each run's wall time and exit status.
#
# usage: scripts/record-results.sh [--out DIR] [--steps build,lessons,compare-default,compare-comm,transport,exercises,large]
#   --out    where to write (default: docs/results/<GPUs>x<model>-<UTC date>, e.g. 2xH200-2026-11-22);
#            an existing folder is refused (exit 2): results are kept, not overwritten
#   --steps  a comma list of the steps to run, in the order given (default: all seven, in this order)
#   (each flag may also be given as --flag=value)
# Without a GPU it says so in one line and exits 3. It records whole machines: with CUDA_VISIBLE_DEVICES
# hiding some of the GPUs it refuses (exit 2), as the results folder and the figures name the machine's
# GPUs. The build step starts from an empty build/ folder, so --out may not lie in it. Exit 1 when any
# step failed (the others still run) or the paths in the results could not be made relative.
set -uo pipefail
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/common.sh" || exit 3
export FWI_NEEDS_TEST_TOOLS=1  # doctest and Google Benchmark: the tests and benchmarks it runs need them
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0

bad_flag() { echo "record-results: $1" >&2; exit 2; }
all_steps="build lessons compare-default compare-comm transport exercises large"
out="" steps="${all_steps// /,}"
while [ $# -gt 0 ]; do
    # --flag=value is --flag value (for the flags that take one).
    case "$1" in --out=* | --steps=*) set -- "${1%%=*}" "${1#*=}" "${@:2}" ;; esac
    case "$1" in
        -h|--help) print_help "${BASH_SOURCE[0]}"; exit 0 ;;
        --out|--steps) [ $# -ge 2 ] || bad_flag "$1: missing value"
            first_time "$1" || bad_flag "$1 given twice"
            [ -n "$2" ] || bad_flag "$1: needs a non-empty value"
            [[ "$1" != --out || "$2" != -* ]] ||
                bad_flag "--out: '$2' is a flag, not a folder (a folder whose name starts with - can be given as ./$2)"
            [ "$1" = --out ] && out="$2" || steps="$2"; shift 2 ;;
        *) bad_flag "unknown flag '$1' (--help lists the flags)" ;;
    esac
done
[[ "$steps" =~ ^[a-z-]+(,[a-z-]+)*$ ]] ||
    bad_flag "--steps: '$steps' is not a comma list of steps (${all_steps// /, }) without empty items"
for step in ${steps//,/ }; do
    [[ " $all_steps " == *" $step "* ]] || bad_flag "--steps: '$step' is not one of ${all_steps// /, }"
done
repeated="$(repeated_item "$steps")"
[ -z "$repeated" ] || bad_flag "--steps: '$repeated' is listed twice"
# A given --out is checked before the GPU (and made again once there is one); the default one names the
# GPUs, so it is checked after.
check_out() {
    [ -e "$out" ] && bad_flag "--out: '$out' exists; results are kept, so choose another folder"
    [[ "$out/" == "$(realpath -m -- "$BUILD_DIR")/"* ]] &&
        bad_flag "--out: '$out' is inside the build folder, which the build step deletes"
    # Inside the repository only in docs/results (the default) or out/: compare.sh refuses other folders
    # there for its --out, a folder of this one's, which would fail the comparison steps after the others.
    why="$(repository_folder_reason "$out" docs/results)"
    [ -z "$why" ] || bad_flag "--out: $why"
    why="$(unwritable_folder_reason "$out")"
    [ -z "$why" ] || bad_flag "--out: $why"
}
if [ -n "$out" ]; then
    out="$(realpath -m -- "$out")"
    made_from="$(first_missing_folder "$out")"
    check_out
    remove_made_folders "$out" "$made_from"  # ours, just made and empty: made again once there is a GPU
fi
# The GPUs first: without one there is nothing to record, whatever CUDA_VISIBLE_DEVICES says. One line per
# GPU ("GPU 0: ..."); a GPU in MIG mode adds an indented line per instance, which is no GPU.
if ! command -v nvidia-smi >/dev/null 2>&1; then
    echo "record-results: nvidia-smi is not installed, and the recording lists the machine's GPUs with it (a container: give it NVIDIA's utility capability, NVIDIA_DRIVER_CAPABILITIES=compute,utility)" >&2
    exit 3
fi
if ! listing="$(quick_query nvidia-smi -L 2>/dev/null)" || ! listing="$(grep '^GPU ' <<<"$listing")"; then
    echo "record-results: no CUDA GPU visible (nvidia-smi -L fails, does not answer or lists none); results are measured on GPUs" >&2
    exit 3
fi
gpus=$(grep -c . <<<"$listing")
# The whole machine: CUDA_VISIBLE_DEVICES, if set (a Slurm allocation sets it), must name every GPU once, by
# its index or its UUID (CUDA stops at an entry it cannot use: "0,0" and "abc" hide GPUs too).
if [ -n "${CUDA_VISIBLE_DEVICES+set}" ]; then
    IFS=, read -r -a entries <<<"$CUDA_VISIBLE_DEVICES"
    named=0
    for ((i = 0; i < gpus; i++)); do
        uuid=$(sed -n "$((i + 1))s/.*(UUID: \([^)]*\)).*/\1/p" <<<"$listing")
        if is_one_of "$i" "${entries[@]}" || { [ -n "$uuid" ] && is_one_of "$uuid" "${entries[@]}"; }; then
            named=$((named + 1))
        fi
    done
    [ "$named" -eq "$gpus" ] && [ "${#entries[@]}" -eq "$gpus" ] ||
        bad_flag "CUDA_VISIBLE_DEVICES='$CUDA_VISIBLE_DEVICES' does not name each of the machine's $gpus GPUs once (by index or UUID), so it hides some of them: the results record the whole machine, named by its GPUs; unset it (env -u CUDA_VISIBLE_DEVICES scripts/record-results.sh ...)"
fi
check_cuda_environment  # before the build step, whose own refusal would end up in its log only
# The results' paths are made relative with python3 at the end (the build step installs it where missing):
# checked now, not after hours of runs.
python="$(python3_path)"
if [ -z "$python" ] && ! is_one_of build ${steps//,/ }; then
    echo "record-results: no python3 that runs (none on PATH or at /usr/bin/python3), and the results' paths are" \
         "made relative with it (scripts/relative_paths.py); install python3 or put it on PATH, or run the build step" >&2
    exit 3
fi
# The model, for the folder's name: the first GPU's name without the maker's words and what follows the model
# (memory, form factor), letters and digits only: "NVIDIA H100 80GB HBM3" H100, "NVIDIA A100-SXM4-80GB"
# A100, "NVIDIA GeForce RTX 4090" RTX4090, "NVIDIA RTX 6000 Ada Generation" RTX6000Ada.
model_of() {
    local word model=""
    for word in $1; do
        case "$word" in
            NVIDIA | GeForce | Tesla | Quadro) continue ;;
            [0-9]*GB | PCIe | SXM* | HBM* | NVL | Generation) break ;;
        esac
        model+="${word%%-*}"
        [[ "$word" != *-* ]] || break
    done
    model="${model//[^A-Za-z0-9]/}"
    echo "${model:-GPU}"
}
model=$(model_of "$(quick_query nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1 | cut -d, -f1)")
[ -n "$out" ] || out="$(realpath -m -- "$ROOT/docs/results/${gpus}x${model}-$(date -u +%Y-%m-%d)")"
check_out
# compare.sh keeps out of docs/results, except this new recording's own folder.
export FWI_RECORDING_INTO="$out"
failed=0
# The commit of the code measured, which the figures made from these results are stamped with. Where the
# checkout's git metadata is not that of its files (a copy), say it: FWI_SOURCE_COMMIT=<commit>.
commit="${FWI_SOURCE_COMMIT:-$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)}"
# Results folders (this recording's and others not yet committed) are not code: they do not make it dirty.
[ -z "${FWI_SOURCE_COMMIT:-}" ] && [ -n "$(git -C "$ROOT" status --porcelain -- . ':!docs/results' 2>/dev/null)" ] &&
    commit+="-dirty"
printf 'commit: %s\n' "$commit" >"$out/source.txt"
printf 'step\tseconds\texit\tcommand\n' >"$out/timings.tsv"

# record NAME COMMAND...: runs it with its output in NAME.log, its wall time and exit status in timings.tsv.
record() {
    local name="$1" line
    shift
    line="$(shell_line "$@")"
    mkdir -p "$(dirname "$out/$name")"
    echo "== $name: $line"
    echo "\$ $line" >"$out/$name.log"
    local start=$SECONDS
    run_with_timeout 1200 "$@" >>"$out/$name.log" 2>&1
    local code=$?
    printf '%s\t%d\t%d\t%s\n' "$name" $((SECONDS - start)) "$code" "$line" >>"$out/timings.tsv"
    tail -n 2 "$out/$name.log"
    return $code
}
# expect_refusal NAME COMMAND...: a run that must be refused (exit 2 or 3), recorded like record.
expect_refusal() {
    local name="$1"
    shift
    record "$name" "$@"
    local code=$?
    [ $code -eq 2 ] || [ $code -eq 3 ] || { echo "record-results: $name: exit $code, expected a refusal (2 or 3)"; failed=1; }
}
# observe NAME COMMAND...: a run whose exit status is part of what it shows (a fault, a hang doctor ends,
# a wrong launch): recorded like record, whatever its exit.
observe() { record "$@" || true; }
run() { record "$@" || failed=1; }

bin="$BUILD_DIR"
lock_build_folder "$bin"  # its build step deletes the folder another script may be using
mapfile -t mpi < <(mpi_launcher)

for step in ${steps//,/ }; do
    case "$step" in
    build)
        # The build as a newcomer's first one: a fresh build folder (timed, with the packages step).
        rm -rf "$bin"
        run build bash -c 'source "$1/scripts/common.sh" && configure_and_build default' bash "$ROOT" ;;
    lessons)
        run lessons/01_single_gpu "$bin/01_single_gpu/01_single_gpu" --json "$out/lessons/01_single_gpu.json" \
            --out "$out/lessons/01_single_gpu-files"
        run lessons/01_single_gpu-verify "$bin/01_single_gpu/01_single_gpu" --verify --json "$out/lessons/01_single_gpu-verify.json"
        run lessons/02_allreduce_primitives "$bin/02_allreduce_primitives/02_allreduce_primitives" \
            --json "$out/lessons/02_allreduce_primitives.json"
        run lessons/03_host_staged_mpi "${mpi[@]}" -np "$gpus" "$bin/03_host_staged_mpi/03_host_staged_mpi" \
            --json "$out/lessons/03_host_staged_mpi.json"
        run lessons/04_nccl_threads "$bin/04_nccl_threads/04_nccl_threads" --json "$out/lessons/04_nccl_threads.json"
        run lessons/05_nccl_mpi "${mpi[@]}" -np "$gpus" "$bin/05_nccl_mpi/05_nccl_mpi" --json "$out/lessons/05_nccl_mpi.json"
        run lessons/05_nccl_mpi-bench "${mpi[@]}" -np "$gpus" "$bin/05_nccl_mpi/05_nccl_mpi" --bench-allreduce \
            --json "$out/lessons/05_nccl_mpi-bench.json"
        run lessons/06_fwi_shot_parallel "${mpi[@]}" -np "$gpus" "$bin/06_fwi_shot_parallel/06_fwi_shot_parallel" \
            --no-plots --json "$out/lessons/06_fwi_shot_parallel.json" --out "$out/lessons/06_fwi_shot_parallel-files"
        run lessons/doctor "$bin/doctor/doctor" --json "$out/lessons/doctor.json"
        # What a room with one GPU per student meets: two ranks on one GPU, which MPI allows (03 warns)
        # and NCCL refuses (05).
        if [ "$gpus" -eq 1 ]; then
            run lessons/03_host_staged_mpi-2-ranks-1-gpu "${mpi[@]}" -np 2 "$bin/03_host_staged_mpi/03_host_staged_mpi" \
                --json "$out/lessons/03_host_staged_mpi-2-ranks-1-gpu.json"
            expect_refusal lessons/05_nccl_mpi-2-ranks-1-gpu "${mpi[@]}" -np 2 "$bin/05_nccl_mpi/05_nccl_mpi"
        fi
        # The programs' own output files (models, gathers: binary, megabytes) are not results.
        rm -rf "$out"/lessons/*-files ;;
    compare-default|compare-comm)
        run "$step" "$ROOT/scripts/compare.sh" --problem "${step#compare-}" --out "$out/$step"
        # The programs' own output folders (models, gathers: binary, megabytes) are not results.
        find "$out/$step/runs" -mindepth 1 -maxdepth 1 -type d -exec rm -rf {} + ;;
    transport)
        # What crossing a node costs, on one host: NCCL's network transport (sockets) instead of NVLink/PCIe.
        for transport in auto network; do
            run transport/05_nccl_mpi-bench-$transport "${mpi[@]}" -np "$gpus" "$bin/05_nccl_mpi/05_nccl_mpi" \
                --bench-allreduce --transport "$transport" --json "$out/transport/05_nccl_mpi-bench-$transport.json"
            for problem in default comm; do
                run transport/06_fwi_shot_parallel-$problem-$transport "${mpi[@]}" -np "$gpus" \
                    "$bin/06_fwi_shot_parallel/06_fwi_shot_parallel" --problem "$problem" --transport "$transport" \
                    --no-reference --no-plots --save-every 0 --json "$out/transport/06_fwi_shot_parallel-$problem-$transport.json" \
                    --out "$out/transport/files"
                rm -rf "$out/transport/files"
            done
        done ;;
    exercises)
        # The exercises' measurements that this machine can make (named lesson-exercise-what); the ones
        # that need more GPUs than there are, or a change to the code, are answered in words.
        e="$out/exercises"
        for shots in 2 4 8; do
            run exercises/01-3-nshots-$shots "$bin/01_single_gpu/01_single_gpu" --nshots $shots --iterations 3 --json "$e/01-3-nshots-$shots.json"
        done
        run exercises/01-3-nt-3000 "$bin/01_single_gpu/01_single_gpu" --nt 3000 --iterations 3 --json "$e/01-3-nt-3000.json"
        if [ "$gpus" -ge 2 ]; then
            for chunks in 1 2 4 16; do
                run exercises/02-1-ring-chunks-$chunks "$bin/02_allreduce_primitives/02_allreduce_primitives" --variants ring \
                    --ring-chunks $chunks -b 256M -e 256M --json "$e/02-1-ring-chunks-$chunks.json"
            done
            for limit in 0 1073741824; do
                run exercises/02-2-one-shot-max-$limit "$bin/02_allreduce_primitives/02_allreduce_primitives" --variants p2p_kernel \
                    --one-shot-max-bytes $limit -b 64K -e 64M -f 4 --json "$e/02-2-one-shot-max-$limit.json"
            done
        fi
        run exercises/03-1-chunks "${mpi[@]}" -np "$gpus" "$bin/03_host_staged_mpi/03_host_staged_mpi" --bench-allreduce \
            --combine pinned,pipelined --chunk-kb 64,256,1024,4096,16384 --in-flight 1,2,4 -b 64M -e 64M
        run exercises/03-1-fwi-chunks "${mpi[@]}" -np "$gpus" "$bin/03_host_staged_mpi/03_host_staged_mpi" \
            --combine pinned,pipelined --chunk-kb 64,256
        for algorithm in 1 2 3 4 5 6; do
            run exercises/03-3-mpi-algorithm-$algorithm "${mpi[@]}" --mca coll_tuned_use_dynamic_rules 1 \
                --mca coll_tuned_allreduce_algorithm $algorithm -np "$gpus" "$bin/03_host_staged_mpi/03_host_staged_mpi" \
                --bench-allreduce --combine pinned -b 32M -e 64M
        done
        for shots in 16 4; do
            run exercises/04-1-nshots-$shots "$bin/04_nccl_threads/04_nccl_threads" --nshots $shots --json "$e/04-1-nshots-$shots.json"
        done
        for driver in threads group; do
            run exercises/04-2-driver-$driver "$bin/04_nccl_threads/04_nccl_threads" --driver $driver --no-reference \
                --iterations 20 --json "$e/04-2-driver-$driver.json"
        done
        run exercises/05-1-bench "${mpi[@]}" -np "$gpus" "$bin/05_nccl_mpi/05_nccl_mpi" --bench-allreduce -b 768K -e 256M -f 2
        run exercises/05-1-bench-02 "$bin/02_allreduce_primitives/02_allreduce_primitives" --variants nccl -b 768K -e 256M -f 2
        expect_refusal exercises/05-2-one-rank-more "${mpi[@]}" -np $((gpus + 1)) "$bin/05_nccl_mpi/05_nccl_mpi"
        [ "$gpus" -ge 2 ] && observe exercises/05-3-stall "${mpi[@]}" -np 2 "$bin/05_nccl_mpi/05_nccl_mpi" \
            --test-fault=stall-before-allreduce:1 --timeout 5
        for every in 1 0; do
            run exercises/06-3-save-every-$every bash -c 'time "$@"' bash "${mpi[@]}" -np "$gpus" \
                "$bin/06_fwi_shot_parallel/06_fwi_shot_parallel" --no-reference --no-plots --iterations 20 \
                --save-every "$every" --out "$e/06-files" --overwrite
        done
        rm -rf "$e/06-files"
        run exercises/doctor-1-p2p-disabled env NCCL_P2P_DISABLE=1 "$bin/doctor/doctor" --checks nccl
        run exercises/doctor-1-default "$bin/doctor/doctor" --checks nccl
        observe exercises/doctor-2-hang env FWI_DOCTOR_INJECT=hang-peer-kernel "$bin/doctor/doctor" --checks p2p --timeout 5
        observe exercises/doctor-3-twice-the-ranks "${mpi[@]}" -np $((2 * gpus)) "$bin/doctor/doctor" --mpi ;;
    large)
        # The scaling problem (1024 x 2048, 32 shots): each NCCL pattern on every GPU against the
        # single-GPU reference it runs itself, 2 iterations (a gradient takes seconds here).
        large_args=(--problem large --iterations 2)
        run large/04_nccl_threads "$bin/04_nccl_threads/04_nccl_threads" "${large_args[@]}" \
            --json "$out/large/04_nccl_threads.json"
        run large/05_nccl_mpi "${mpi[@]}" -np "$gpus" "$bin/05_nccl_mpi/05_nccl_mpi" "${large_args[@]}" \
            --json "$out/large/05_nccl_mpi.json"
        run large/06_fwi_shot_parallel "${mpi[@]}" -np "$gpus" "$bin/06_fwi_shot_parallel/06_fwi_shot_parallel" \
            "${large_args[@]}" --no-plots --json "$out/large/06_fwi_shot_parallel.json" --out "$out/large/06_fwi_shot_parallel-files"
        rm -rf "$out/large/06_fwi_shot_parallel-files" ;;
    esac
done
quick_query nvidia-smi >"$out/nvidia-smi.txt" 2>&1
quick_query nvidia-smi topo -m >>"$out/nvidia-smi.txt" 2>&1
# Paths in the results relative to the repository or to the results folder, as the docs quote them.
if ! find "$out" -type f \( -name '*.log' -o -name '*.json' -o -name '*.tsv' -o -name '*.txt' -o -name '*.md' -o -name '*.csv' \) \
        -print0 | xargs -0 -r "${python:-$(python3_path)}" "$ROOT/scripts/relative_paths.py" "$out" "$ROOT"; then
    echo "record-results: the paths in $out could not all be made relative (above); some keep this machine's" >&2
    failed=1
fi
echo "record-results: wrote $out ($(du -sh "$out" | cut -f1)); timings in $out/timings.tsv"
exit $failed
