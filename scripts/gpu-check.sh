#!/usr/bin/env bash
# On a GPU machine: build, run every test (GPU, multi-GPU and MPI ones included), the fault tests, a
# compute-sanitizer memcheck and racecheck pass over a small problem, the benchmarks briefly, and the
# main job (the cross-pattern comparison); then print a summary.
#
# usage: scripts/gpu-check.sh [STEP...]   STEP: build tests faults sanitizers benchmarks main (default: all)
#
# tests and faults first check that CUDA sees a GPU where nvidia-smi lists one: a GPU test skips where
# CUDA sees none (an empty CUDA_VISIBLE_DEVICES, say), and would pass the step unseen. Where nvidia-smi is
# not installed but the GPUs' device nodes are (some containers), they say how many GPUs CUDA sees.
# Each step is stopped at a generous limit (10 min for the sanitizers' plain verify run, 30 for a
# benchmark, 2 h for main, 1 h for the others), which only a hang reaches: TIMEOUT in the summary.
# Logs go to out/gpu-check/ (emptied first: they are the last run's); when the environment variable GPU_CHECK_OUT
# names a folder (made if missing), the summary, one archive of all logs and, after the main step, the
# comparison table and chart are copied there. Exit 0 only when every step passed, 2 for an unknown or
# repeated step, a GPU_CHECK_OUT that cannot be written, holds the repository's files, lies in the repository
# outside out/ and the build folders, or in out/gpu-check itself, or a CUDAARCHS the build cannot use,
# 3 for a step that needs a GPU (all but build and tests) where none is visible (nvidia-smi lists none, or is
# not installed and there is no GPU device node), compute-sanitizer where it is missing, a CUDACXX that names
# no program, or an out/gpu-check that cannot be written (all before any runs).
set -uo pipefail
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/common.sh" || exit 3
export FWI_NEEDS_TEST_TOOLS=1  # doctest and Google Benchmark: the tests and benchmarks it runs need them
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
all_steps=(build tests faults sanitizers benchmarks main)
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=("${all_steps[@]}")
for s in "${steps[@]}"; do
    case "$s" in
        -h|--help) print_help "${BASH_SOURCE[0]}"; exit 0 ;;
    esac
    if ! is_one_of "$s" "${all_steps[@]}"; then
        echo "gpu-check: unknown step '$s' (steps: ${all_steps[*]}; --help for more)" >&2
        exit 2
    fi
done
repeated="$(repeated_item "$(IFS=,; echo "${steps[*]}")")"
if [ -n "$repeated" ]; then
    echo "gpu-check: step '$repeated' is listed twice" >&2
    exit 2
fi
logs="$ROOT/out/gpu-check"
# Until the steps start, a refusal removes the folders the checks below made (for GPU_CHECK_OUT and the logs).
logs_made_from="$(first_missing_folder "$logs")"
out_made_from=""
trap 'remove_made_folders "$logs" "$logs_made_from"; [ -z "${GPU_CHECK_OUT:-}" ] || remove_made_folders "$GPU_CHECK_OUT" "$out_made_from"' EXIT
# GPU_CHECK_OUT is written at the end, so it is checked now rather than after hours of steps (and made absolute: the
# steps run from the repository's root).
if [ -n "${GPU_CHECK_OUT:-}" ]; then
    GPU_CHECK_OUT="$(realpath -m -- "$GPU_CHECK_OUT")"
    out_made_from="$(first_missing_folder "$GPU_CHECK_OUT")"
    why="$(repository_folder_reason "$GPU_CHECK_OUT")"
    # The logs' folder is archived into GPU_CHECK_OUT at the end: not into a folder inside itself.
    [[ -n "$why" || "$GPU_CHECK_OUT/" != "$(realpath -m -- "$logs")/"* ]] ||
        why="'$GPU_CHECK_OUT' is the check's logs folder (out/gpu-check) or inside it"
    [ -n "$why" ] || why="$(unwritable_folder_reason "$GPU_CHECK_OUT")"
    if [ -n "$why" ]; then
        echo "gpu-check: GPU_CHECK_OUT: $why (the summary and logs are copied there at the end); name a folder of the check's own that can be written, or unset GPU_CHECK_OUT" >&2
        exit 2
    fi
fi
why="$(unwritable_folder_reason "$logs")"
if [ -n "$why" ]; then
    echo "gpu-check: the logs go to out/gpu-check, but $why; run it in a checkout you can write" >&2
    exit 3
fi
cd "$ROOT"
summary=()
failed=0

# step NAME LOGFILE SECONDS COMMAND...: runs the command, stopped after SECONDS (generous: a step that
# takes longer hangs), appends its output to LOGFILE, records PASS/FAIL/TIMEOUT. SECONDS "-": COMMAND is a
# function of this script, which timeout cannot run (the commands in it have limits of their own).
step() {
    local name="$1" log="$logs/$2" limit="$3"
    shift 3
    echo "=== $name: $*" | tee -a "$log"
    local start=$SECONDS code
    if [ "$limit" = - ]; then
        "$@" >>"$log" 2>&1
    else
        run_with_timeout "$limit" "$@" >>"$log" 2>&1
    fi
    code=$?
    local result=PASS
    # 137: killed 30 s after the SIGTERM at the limit (or by another SIGKILL)
    if [ "$limit" != - ] && { [ $code -eq 124 ] || { [ $code -eq 137 ] && [ $((SECONDS - start)) -ge "$limit" ]; }; }; then
        result="TIMEOUT (${limit} s)"
        echo "=== $name: stopped after $limit s, its limit" | tee -a "$log"
        failed=1
    elif [ $code -ne 0 ]; then
        result="FAIL (exit $code)"
        failed=1
    fi
    summary+=("$(printf '%-28s %-16s %4ds' "$name" "$result" $((SECONDS - start)))")
    tail -n 15 "$log"
}

# gpu_listed: yes (nvidia-smi lists GPUs), no, or unknown: nvidia-smi is not installed but the GPUs' device
# nodes are there (a container without NVIDIA's utility capability), where CUDA may still see GPUs, counted once
# the build has made the counter (as compare.sh does): the faults step then fails where CUDA sees none, and
# the sanitizers, benchmarks and main steps fail by themselves (their programs exit 3 without a GPU).
gpu_listed=yes
if ! command -v nvidia-smi >/dev/null 2>&1; then
    no_listing="nvidia-smi is not installed, and there is no GPU device node such as ${FWI_DEV_DIR:-/dev}/nvidia0"
    if gpu_device_nodes_present; then gpu_listed=unknown; else gpu_listed=no; fi
elif ! gpus="$(quick_query nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null)"; then
    no_listing="nvidia-smi fails or does not answer"
    gpu_listed=no
fi
if [ "$gpu_listed" = no ]; then
    # build and tests run without a GPU (its tests show as skipped); the other steps measure one.
    for s in "${steps[@]}"; do
        is_one_of "$s" build tests && continue
        echo "gpu-check: no GPU visible ($no_listing), and step '$s' runs on one; build and tests run without" >&2
        exit 3
    done
fi
{ is_one_of build "${steps[@]}" || is_one_of main "${steps[@]}"; } && check_cuda_environment  # here, not in a log only
if is_one_of sanitizers "${steps[@]}" && ! command -v compute-sanitizer >/dev/null 2>&1; then
    echo "gpu-check: compute-sanitizer, which the sanitizers step runs, is not on PATH (it comes with the CUDA toolkit, in its bin folder)" >&2
    exit 3
fi
case "$gpu_listed" in
    yes) gpus="$(sort <<<"$gpus" | uniq -c | tr -s ' ' | paste -sd ';' -)" ;;  # " 4 NVIDIA H100 ..., 570.1, 81559 MiB"
    no) gpus="no GPU visible ($no_listing): every GPU test will show as skipped" ;;
    unknown) gpus="GPUs not listed (nvidia-smi is not installed): the tests and faults steps say CUDA's count" ;;
esac
machine="$gpus, $(nvcc --version 2>/dev/null | tail -n 1)"
bin="$BUILD_DIR"
# The small problem (64 x 96, 4 shots, nt 500): short enough for the sanitizers, long enough that the
# reflections reach the receivers and the gradient is not trivially zero.
verify=("$bin/01_single_gpu/01_single_gpu" --verify)

# cuda_sees_the_gpus STEP: where nvidia-smi lists GPUs, CUDA must see at least one. A GPU test skips (exit 77)
# where CUDA sees none, so an empty CUDA_VISIBLE_DEVICES, say, would show every GPU test as skipped and the
# steps as passed. (A driver CUDA cannot use makes the counter fail, and the GPU tests with it.) Without
# nvidia-smi, CUDA's count is said, and none is a failure for every step but tests, which runs without a GPU
# (as where nvidia-smi lists none).
cuda_sees_the_gpus() {
    [ "$gpu_listed" != no ] || return 0
    local step="$1" seen counter="$bin/common/visible_gpus"
    if ! seen=$(count_visible_gpus "$counter" 2>&1); then
        [ -x "$counter" ] || seen+=" (build first)"
        echo "gpu-check: $seen"
        return 1
    fi
    if [ "$gpu_listed" = unknown ]; then
        echo "gpu-check: CUDA sees $seen GPU(s) (nvidia-smi is not installed to list them)"
        [ "$seen" -gt 0 ] && return 0
        [ "$step" = tests ] && { echo "gpu-check: every GPU test will show as skipped"; return 0; }
        echo "gpu-check: step '$step' runs on a GPU"
        return 1
    fi
    [ "$seen" -gt 0 ] && return 0
    echo "gpu-check: nvidia-smi lists GPUs, but CUDA sees none${CUDA_VISIBLE_DEVICES+ (CUDA_VISIBLE_DEVICES='$CUDA_VISIBLE_DEVICES')}: every GPU test would be skipped; build/doctor/doctor (its check 1) says why"
    return 1
}

# The logs are this run's alone: an earlier run's, appended to or left beside them, would read as this one's
# (an interrupted run would leave the last one's summary, all PASS). Emptied only now, when the steps are
# about to run: a refused run leaves the last run's logs as they were.
lock_build_folder "$BUILD_DIR"  # another check, test run or comparison in build/ would clash with this one
rm -f -- "$logs"/*.log "$logs/summary.txt"
trap - EXIT

# Three tests at a time, but one where a GPU takes one process at a time (exclusive-process compute mode).
test_jobs=3
if gpus_take_one_process; then
    test_jobs=1
    echo "gpu-check: a GPU is in exclusive-process compute mode (nvidia-smi), which takes one process at a time:" \
         "the tests run one at a time"
fi

# The limits of the steps, in seconds: several times what each takes on one H100 (the build 5-10 min,
# racecheck up to 10 min), so that only a hang reaches one.
for s in "${steps[@]}"; do
    case "$s" in
        build) step build build.log 3600 bash -c 'source "$1/scripts/common.sh" && configure_and_build default' bash "$ROOT" ;;
        tests)
            step cuda_sees_the_gpus tests.log - cuda_sees_the_gpus tests
            step tests tests.log 3600 ctest --preset default -E fault -j"$test_jobs" --output-on-failure ;;
        # 10 trials per kind of failure, each waiting for a timeout: minutes, so a step of its own.
        faults)
            step cuda_sees_the_gpus faults.log - cuda_sees_the_gpus faults
            step fault_tests faults.log 3600 ctest --preset default -R fault -j"$test_jobs" --output-on-failure ;;
        sanitizers)
            step verify sanitizer.log 600 "${verify[@]}"
            step memcheck sanitizer.log 3600 compute-sanitizer --tool memcheck --error-exitcode 1 "${verify[@]}"
            step racecheck sanitizer.log 3600 compute-sanitizer --tool racecheck --error-exitcode 1 "${verify[@]}" ;;
        benchmarks)
            step bench_propagator bench.log 1800 "$bin/bench/bench_propagator" \
                --benchmark_out="$logs/bench_propagator.json" --benchmark_out_format=json
            # A short minimum time per case (Google Benchmark's default, 0.5 s, makes this step minutes
            # longer), spelt as the installed version takes it: 1.8 wants the "s" (without it, a warning
            # per case), 1.7 (Debian 12) refuses it. Listing the cases needs no GPU.
            min_time=0.05s
            quick_query "$bin/02_allreduce_primitives/bench_allreduce" --benchmark_min_time=$min_time --benchmark_list_tests \
                >/dev/null 2>&1 || min_time=0.05
            step bench_allreduce bench.log 1800 "$bin/02_allreduce_primitives/bench_allreduce" \
                --benchmark_min_time=$min_time ;;
        main) step main_job main.log 7200 "$ROOT/scripts/compare.sh" --out "$logs/compare" ;;
    esac
done

{
    echo "gpu-check summary, $(date -u +%Y-%m-%dT%H:%MZ), machine:$machine"
    printf '%s\n' "${summary[@]}"
} | tee "$logs/summary.txt"
if [ -n "${GPU_CHECK_OUT:-}" ]; then
    # This run's comparison only: an earlier run's main step left its own in out/gpu-check/compare.
    is_one_of main "${steps[@]}" && cp "$logs"/compare/comparison.md "$logs"/compare/comparison.png "$GPU_CHECK_OUT/" 2>/dev/null
    if ! { cp "$logs/summary.txt" "$GPU_CHECK_OUT/" && tar czf "$GPU_CHECK_OUT/gpu-check-logs.tar.gz" -C "$logs/.." gpu-check; }; then
        echo "gpu-check: could not copy the summary and logs to \$GPU_CHECK_OUT ($GPU_CHECK_OUT)" >&2
        failed=1
    fi
fi
exit $failed
