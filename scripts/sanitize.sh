#!/usr/bin/env bash
# Builds the suite's host code with AddressSanitizer and UndefinedBehaviorSanitizer (in build-asan/) and
# runs every test that needs no GPU (label cpu) under them. Any report in the run fails it (exit 1), also
# one from a program that a test starts under mpirun or expects to fail: the sanitizers write their
# reports to files (build-asan/sanitizer-logs/), which are read after the tests. Open MPI's own leaks
# at start-up are suppressed, and one test is left out: the one that runs 01 under `ulimit -v`, where
# AddressSanitizer cannot reserve its shadow memory. The GPU kernels are not instrumented here;
# compute-sanitizer checks them (scripts/gpu-check.sh sanitizers). About 10 minutes on 2 cores.
#
# usage: scripts/sanitize.sh [-j N]   N (or -jN): tests at a time (default: the number of cores)
# Exit 0 when every test passed without a report, 1 otherwise, 2 for a bad argument, 3 where it cannot
# build here: a tool missing, or a repository path holding a space, comma or colon (clone it elsewhere).
set -euo pipefail
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/common.sh" || exit 3
export FWI_NEEDS_TEST_TOOLS=1  # doctest and Google Benchmark: the tests and benchmarks it runs need them

bad_flag() { echo "sanitize: $1 (scripts/sanitize.sh --help)" >&2; exit 2; }

jobs="$(nproc)"
while [ $# -gt 0 ]; do
    case "$1" in -j?*) set -- -j "${1#-j}" "${@:2}" ;; esac  # -j4 is -j 4, as for make and ctest
    case "$1" in
        -h|--help) print_help "${BASH_SOURCE[0]}"; exit 0 ;;
        -j)
            [ $# -ge 2 ] || bad_flag "-j: missing value"
            [[ "$2" =~ ^[1-9][0-9]{0,3}$ ]] || bad_flag "-j: '$2' is not a number of tests in 1..9999"
            first_time -j || bad_flag "-j given twice"
            jobs="$2"
            shift 2 ;;
        *) bad_flag "unknown argument '$1'" ;;
    esac
done

build="$ROOT/build-asan"
# The sanitizers read their options as a list split at spaces, commas and colons: a log folder whose path
# holds one would send the reports elsewhere, unseen.
[[ "$build" != *[[:space:],:]* ]] ||
    { echo "sanitize: the repository's path '$ROOT' holds a space, comma or colon, which the sanitizers' log path cannot; clone it elsewhere" >&2; exit 3; }
check_cuda_environment
install_missing_packages
lock_build_folder "$build"
flags=(-fsanitize=address -fsanitize=undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
host_flags="${flags[*]}"
nvcc_flags="-Xcompiler=${host_flags// /,}"  # nvcc passes on a comma list; no flag above holds a comma
# Where no GPU is visible, kernels for one architecture only: the cpu tests launch none.
cmake -S "$ROOT" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFWI_NO_GPU_ARCHITECTURES=90 \
    -DCMAKE_CXX_FLAGS="$host_flags" -DCMAKE_CUDA_FLAGS="$nvcc_flags" \
    -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
    -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
cmake --build "$build" -j "$(nproc)"

logs="$build/sanitizer-logs"
rm -rf "$logs"
mkdir -p "$logs"
# Open MPI allocates at start-up what it never frees; its libraries and plugins (mca_*) are named here.
# The slow unwinder follows stacks through Open MPI's code, which has no frame pointers.
printf 'leak:%s\n' libmpi.so libopen-pal.so libopen-rte.so libpmix.so libhwloc.so libevent libcuda.so mca_ \
    >"$build/leak-suppressions.txt"
status=0
(
    cd "$build"
    export ASAN_OPTIONS="protect_shadow_gap=0:detect_leaks=1:fast_unwind_on_malloc=0:halt_on_error=1:log_path=$logs/asan"
    export LSAN_OPTIONS="suppressions=$build/leak-suppressions.txt:print_suppressions=0"
    export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:log_path=$logs/ubsan"
    ctest -L cpu -E '^memory_01_single_gpu_process_limit$' -j "$jobs" --output-on-failure
) || status=1
reports=$(grep -l -E "ERROR: (Address|Leak)Sanitizer|runtime error:" "$logs"/* 2>/dev/null || true)
if [ -n "$reports" ]; then
    echo "sanitize: sanitizer reports in:" >&2
    echo "$reports" >&2
    status=1
fi
[ "$status" -eq 0 ] && echo "sanitize: every cpu test passed under AddressSanitizer and UndefinedBehaviorSanitizer, no report"
exit "$status"
