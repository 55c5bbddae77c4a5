#!/usr/bin/env bash
# The scripts' checks of numbers in a locale other than C, where a bracket range such as [0-9] also takes
# "²" or "５": compare.sh, run-tests.sh and the cluster recipes must still refuse such a count (exit 2),
# before any build. The locale is made in a scratch folder with localedef (de_DE.UTF-8, whose collation
# has those characters between 0 and 9); exit 77 (skipped) where it cannot be made. Needs no GPU.
# usage: tests/scripts_locale_test.sh [REPO_ROOT]     exit 0 when every case passes
set -uo pipefail
repo="$(cd "${1:-$(dirname "${BASH_SOURCE[0]}")/..}" && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT  # ours, from mktemp
if ! localedef -i de_DE -f UTF-8 "$tmp/de_DE.UTF-8" >/dev/null 2>&1 ||
    [ "$(LOCPATH="$tmp" LC_ALL=de_DE.UTF-8 bash -c '[[ ² =~ ^[0-9]$ ]] && echo takes')" != takes ]; then
    echo "no locale here whose [0-9] takes '²' (localedef or its de_DE source missing): skipped"
    exit 77
fi
failures=0
# refused NAME TEXT COMMAND...: COMMAND, in that locale, exits 2 and prints TEXT.
refused() {
    local name="$1" text="$2" out code
    shift 2
    out="$(LOCPATH="$tmp" LC_ALL=de_DE.UTF-8 CUDA_VISIBLE_DEVICES= timeout 60 "$@" 2>&1)"
    code=$?
    if [ "$code" -eq 2 ] && [[ "$out" == *"$text"* ]]; then
        echo "ok:   $name"
    else
        echo "FAIL: $name: exit $code (expected 2 and '$text'), output:"
        sed 's/^/    /' <<<"$out"
        failures=$((failures + 1))
    fi
}
refused compare_iterations "--iterations: '1²' is not an integer" bash "$repo/scripts/compare.sh" --iterations 1²
refused compare_gpus "--gpus" bash "$repo/scripts/compare.sh" --gpus 1,2½
refused run_tests_jobs "-j: '１' is not a number of tests" bash "$repo/scripts/run-tests.sh" -j １
refused cuda_architectures "CUDAARCHS='9²' is not a list of CUDA architectures" env CUDAARCHS='9²' \
    bash "$repo/scripts/run-tests.sh"
echo "node1 slots=4" >"$tmp/hosts"
refused cluster_gpus_per_node "--gpus-per-node: '4²' is not a count" \
    bash "$repo/scripts/cluster/hostfile-run.sh" --dry-run --hostfile "$tmp/hosts" --gpus-per-node 4² 05_nccl_mpi
[ "$failures" -eq 0 ] && echo "all checks passed" || exit 1
