#!/usr/bin/env bash
# On a GPU machine: build, run every test (GPU ones included), a compute-sanitizer memcheck and
# racecheck pass over a small problem, the benchmarks briefly, and the main job; then print a summary.
# Logs go to $OUT (or out/gpu-check), at most 8 files. Exit 0 only when every step passed.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
OUT="${OUT:-$ROOT/out/gpu-check}"
mkdir -p "$OUT"
cd "$ROOT"
summary=()
failed=0

# step NAME LOGFILE COMMAND...: runs the command, appends its output to LOGFILE, records PASS/FAIL.
step() {
    local name="$1" log="$2"
    shift 2
    echo "=== $name: $*" | tee -a "$log"
    local start=$SECONDS
    "$@" >>"$log" 2>&1
    local code=$?
    local result=PASS
    [ $code -ne 0 ] && { result="FAIL (exit $code)"; failed=1; }
    summary+=("$(printf '%-28s %-16s %4ds' "$name" "$result" $((SECONDS - start)))")
    tail -n 15 "$log"
}

machine="$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | sort | uniq -c |
           tr -s ' ' | paste -sd ';' -), $(nvcc --version | tail -n 1)"

step build "$OUT/build.log" configure_and_build default
step tests "$OUT/tests.log" ctest --preset default --output-on-failure
bin="$ROOT/build"
step verify "$OUT/tests.log" "$bin/01_single_gpu/01_single_gpu" --verify
# The small problem (64 x 96, 4 shots, nt 500): short enough for the sanitizers, long enough that the
# reflections reach the receivers and the gradient is not trivially zero.
step memcheck "$OUT/sanitizer.log" compute-sanitizer --tool memcheck --error-exitcode 1 \
    "$bin/01_single_gpu/01_single_gpu" --verify
step racecheck "$OUT/sanitizer.log" compute-sanitizer --tool racecheck --error-exitcode 1 \
    "$bin/01_single_gpu/01_single_gpu" --verify
step benchmarks "$OUT/bench.log" "$bin/bench/bench_propagator" --benchmark_out="$OUT/bench.json" \
    --benchmark_out_format=json
step main_job "$OUT/main.log" "$bin/01_single_gpu/01_single_gpu" --out "$ROOT/out/01_single_gpu"

{
    echo "gpu-check summary, $(date -u +%Y-%m-%dT%H:%MZ), machine:$machine"
    printf '%s\n' "${summary[@]}"
} | tee "$OUT/summary.txt"
exit $failed
