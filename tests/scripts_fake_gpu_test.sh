#!/usr/bin/env bash
# The scripts' answers about GPUs, with fake ones: a fake nvidia-smi first on PATH, and a copy of scripts/
# in a scratch repository whose build/ holds a fake visible_gpus and 01_single_gpu, and whose common.sh
# builds nothing (configure_and_build replaced). compare.sh and record-results.sh say "no GPU" (exit 3)
# before the build and before any other check; record-results.sh refuses a CUDA_VISIBLE_DEVICES that hides
# GPUs (exit 2), an existing --out and an unknown step; compare.sh refuses an --out that holds files no
# comparison made (exit 2), a GPU count that is not a number
# or a counter that fails (exit 3) and a --gpus above CUDA's count (exit 2), runs 01 with ceil(shots / N)
# shots for the model, says a killed run failed (exit 137, not a timeout), given a RESULT of 01 whose
# shots are null prints its table without the model's inputs instead of dying in the arithmetic, stops
# its GPU counts at the problem's shots (a count asked for above them is exit 2), and warns of other
# processes on the runs' GPUs (visible_gpus --other-processes), with a note under the table, and of GPUs
# that are not all one model (machine.json);
# record-results.sh's comparison goes into its own new folder of docs/results, where compare.sh alone may
# not write; its source.txt says "-dirty" for a changed file, not for results folders not yet committed.
# gpu-check.sh refuses a GPU_CHECK_OUT it cannot write or among the repository's files before any step (exit 2),
# and a GPU step without a GPU (nvidia-smi failing, or missing where there are no GPU device nodes; with them,
# CUDA's count decides) and the sanitizers step without compute-sanitizer (exit 3), leaving the
# last run's logs and removing the folders it made to check GPU_CHECK_OUT and its logs' folder; it fails a step
# that fails and a tests step where CUDA sees no GPU (exit 1), copies into GPU_CHECK_OUT no comparison of an earlier
# run, and says so where its logs cannot go (exit 3); gpu-check.sh and run-tests.sh run the tests one at a
# time where a GPU is in exclusive-process compute mode; sanitize.sh refuses a repository path its
# sanitizers' logs cannot hold (exit 3). Then every script through a symbolic link. No GPU, nothing built
# or installed. record-results.sh records each command as a line that can be pasted.
#
# usage: tests/scripts_fake_gpu_test.sh [REPO_ROOT]     exit 0 when every case passes
set -uo pipefail
repo="$(cd "${1:-$(dirname "${BASH_SOURCE[0]}")/..}" && pwd)"
[ -f "$repo/scripts/common.sh" ] || { echo "no $repo/scripts/common.sh" >&2; exit 1; }

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT  # ours, from mktemp
# A GPU_CHECK_OUT of the caller's (a gpu-check.sh run whose tests step runs this test) would reach every
# gpu-check.sh below: the cases that want one set it themselves.
unset GPU_CHECK_OUT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
calls="$tmp/calls.log"
mkdir -p "$tmp/bin"

# The scratch repository: scripts/ copied, configure_and_build logging instead of building.
scratch="$tmp/repo"
mkdir -p "$scratch/build/common" "$scratch/build/01_single_gpu"
cp -r "$repo/scripts" "$scratch/"
# (FAKE_BUILD_FAILS=1: the build fails.)
printf '\nconfigure_and_build() { echo "configure_and_build $*" >>"%s"; [ -z "${FAKE_BUILD_FAILS:-}" ]; }\n' "$calls" >>"$scratch/scripts/common.sh"
# fake PATH NAME BODY: an executable shell script.
fake() { printf '#!/bin/sh\n%s\n' "$2" >"$1" && chmod +x "$1"; }
# nvidia-smi lists FAKE_GPUS GPUs (-L, --query-gpu) named FAKE_GPU_NAME (an H100 by default), each with
# FAKE_MIG instances (-L: lines of their own, as in MIG mode; none by default) and in compute mode
# FAKE_COMPUTE_MODE (Default), or fails when FAKE_GPUS is 0.
# FAKE_L_TEXT: what -L prints instead, with success.
fake "$tmp/bin/nvidia-smi" '[ "${FAKE_GPUS:-0}" -gt 0 ] || { echo "NVIDIA-SMI has failed" >&2; exit 9; }
[ -z "${FAKE_L_TEXT:-}" ] || [ "$*" != -L ] || { echo "$FAKE_L_TEXT"; exit 0; }
name="${FAKE_GPU_NAME:-NVIDIA H100 80GB HBM3}"
for i in $(seq 0 $((FAKE_GPUS - 1))); do
  case "$*" in
    *compute_mode*) echo "${FAKE_COMPUTE_MODE:-Default}" ;;
    -L) echo "GPU $i: $name (UUID: GPU-$i)"
        for m in $(seq 1 "${FAKE_MIG:-0}"); do echo "  MIG 1g.10gb     Device  $m: (UUID: MIG-$i-$m)"; done ;;
    *query-gpu*) echo "$name, 570.00, 81559 MiB" ;;
  esac
done'

# visible_gpus prints FAKE_VISIBLE (CUDA's count) and exits FAKE_VISIBLE_EXIT (0); its --env-json prints
# FAKE_ENV_JSON, or fails where that is unset (compare.sh then warns); its --other-processes prints
# FAKE_GPU_USERS (none when unset) and exits FAKE_USERS_EXIT (0).
fake "$scratch/build/common/visible_gpus" 'if [ "$*" = --other-processes ]; then printf "%b" "${FAKE_GPU_USERS:-}"
exit "${FAKE_USERS_EXIT:-0}"; fi
if [ "$*" = --env-json ]; then [ -n "${FAKE_ENV_JSON:-}" ] && echo "$FAKE_ENV_JSON"; exit; fi
[ "$#" -eq 0 ] || exit 1; echo "$FAKE_VISIBLE"; exit "${FAKE_VISIBLE_EXIT:-0}"'

# 01 writes a RESULT of the fwi kind with FAKE_SHOTS shots and FAKE_GRADIENT_BYTES gradient_bytes (null when
# unset) (--json PATH); with FAKE_KILLED=1 it is killed (SIGKILL, as by the OOM killer) instead.
fake "$scratch/build/01_single_gpu/01_single_gpu" '[ -z "${FAKE_KILLED:-}" ] || kill -9 $$
while [ $# -gt 1 ] && [ "$1" != --json ]; do shift; done
printf "{\"kind\": \"fwi\", \"shots\": ${FAKE_SHOTS:-null}, \"gradient_bytes\": ${FAKE_GRADIENT_BYTES:-null}}\n" >"$2"'

# run VAR=value... -- COMMAND...: COMMAND with the fake tools first on PATH; sets out (stdout and stderr),
# code, and built (what configure_and_build was asked).
run() {
    local vars=()
    while [ "$1" != -- ]; do vars+=("$1"); shift; done
    shift
    rm -f "$calls"
    out="$(env -u CUDA_VISIBLE_DEVICES PATH="$tmp/bin:$PATH" "${vars[@]}" "$@" 2>&1)"
    code=$?
    built="$(cat "$calls" 2>/dev/null)"
}
# expect NAME CODE TEXT: the last run exited CODE and printed TEXT, and printed no shell error.
expect() {
    if [ "$code" -eq "$2" ] && [[ "$out" == *"$3"* ]] && ! grep -Eq 'unbound variable|integer expression|command not found|No such file' <<<"$out"; then
        echo "ok:   $1"
    else
        fail "$1: exit $code (expected $2 and the text '$3'), output:"
        sed 's/^/    /' <<<"$out"
    fi
}

# ---- no GPU: exit 3 before the build, and before CUDA_VISIBLE_DEVICES is looked at ----
run FAKE_GPUS=0 -- bash "$scratch/scripts/compare.sh" --out "$tmp/compare/of/today"
expect compare_no_gpu 3 "compare: no CUDA GPU visible (nvidia-smi -L fails"
[ -z "$built" ] || fail "compare_no_gpu: built before saying there is no GPU ($built)"
[ ! -e "$tmp/compare" ] || fail "compare_no_gpu: left the --out folder (or its parents) it made to check it"
# No nvidia-smi at all (a container without NVIDIA's utility capability): where the GPUs' device nodes are,
# CUDA may still see GPUs, so the build goes ahead and CUDA's count decides (here none: exit 3 after the
# build); without device nodes there is no GPU, said before the build.
mkdir -p "$tmp/no-smi" && for tool in bash dirname readlink sed grep mkdir rm rmdir cat head tail sort uniq tr \
    paste date mktemp mv cp ls basename seq timeout id nproc env cut wc awk touch realpath python3 nvcc; do
    real="$(command -v "$tool")" && ln -sf "$real" "$tmp/no-smi/$tool"
done
mkdir -p "$tmp/dev-none" "$tmp/dev-gpus" && touch "$tmp/dev-gpus/nvidia0"
rm -f "$calls"
out="$(env -u CUDA_VISIBLE_DEVICES PATH="$tmp/no-smi" FWI_DEV_DIR="$tmp/dev-none" bash "$scratch/scripts/compare.sh" --out "$tmp/compare-no-smi" 2>&1)"
code=$?
built="$(cat "$calls" 2>/dev/null)"; rm -f "$calls"
expect compare_without_nvidia_smi_or_device_nodes 3 "compare: no CUDA GPU visible (nvidia-smi is not installed, and there is no GPU device node such as $tmp/dev-none/nvidia0)"
[ -z "$built" ] || fail "compare_without_nvidia_smi_or_device_nodes: built before saying there is no GPU ($built)"
out="$(env -u CUDA_VISIBLE_DEVICES PATH="$tmp/no-smi" FWI_DEV_DIR="$tmp/dev-gpus" FAKE_VISIBLE=0 bash "$scratch/scripts/compare.sh" --out "$tmp/compare-no-smi" 2>&1)"
code=$?
built="$(cat "$calls" 2>/dev/null)"; rm -f "$calls"
expect compare_without_nvidia_smi 3 "nvidia-smi is not installed: whether CUDA sees a GPU is known after the build"
[[ "$out" == *"no CUDA GPU visible (to CUDA"* ]] && [ -n "$built" ] ||
    fail "compare_without_nvidia_smi: did not build and then count with CUDA (built: '$built'): $out"
# An empty CUDA_VISIBLE_DEVICES hides every GPU: said before the build, as no GPU is.
run FAKE_GPUS=1 CUDA_VISIBLE_DEVICES= -- bash "$scratch/scripts/compare.sh" --out "$tmp/compare-hidden"
expect compare_empty_visible_devices 3 "compare: no CUDA GPU visible (CUDA_VISIBLE_DEVICES is set and empty"
[ -z "$built" ] || fail "compare_empty_visible_devices: built before saying there is no GPU ($built)"
# A folder of the user's that holds files is refused (exit 2), its files left as they were.
mkdir "$tmp/user files" && echo "the user's table" >"$tmp/user files/comparison.csv"
run FAKE_GPUS=1 FAKE_VISIBLE=1 -- bash "$scratch/scripts/compare.sh" --gpus 1 --out "$tmp/user files"
expect compare_out_holds_user_files 2 "holds files and was not made by compare.sh"
[ -z "$built" ] && [ "$(cat "$tmp/user files/comparison.csv")" = "the user's table" ] && [ ! -e "$tmp/user files/runs" ] ||
    fail "compare_out_holds_user_files: built ($built) or changed the folder: $(ls -A "$tmp/user files")"
rm -r "$tmp/user files"
mkdir "$tmp/kept"  # a folder of the user's above the ones the script makes stays
run FAKE_GPUS=0 CUDA_VISIBLE_DEVICES=0 -- bash "$scratch/scripts/record-results.sh" --steps lessons --out "$tmp/kept/record/of/today"
expect record_results_no_gpu 3 "record-results: no CUDA GPU visible"
[ -d "$tmp/kept" ] && [ ! -e "$tmp/kept/record" ] ||
    fail "record_results_no_gpu: removed a folder it did not make, or left one it made to check --out"
rmdir "$tmp/kept"
# An nvidia-smi that answers without listing a GPU ("No devices were found"): no GPU either, not 0 of them.
run FAKE_GPUS=1 FAKE_L_TEXT="No devices were found" -- bash "$scratch/scripts/record-results.sh" --steps lessons \
    --out "$tmp/record"
expect record_results_no_gpu_listed 3 "record-results: no CUDA GPU visible"
run FAKE_GPUS=2 CUDA_VISIBLE_DEVICES=0 -- bash "$scratch/scripts/record-results.sh" --steps lessons --out "$tmp/record"
expect record_results_some_gpus 2 "CUDA_VISIBLE_DEVICES='0' does not name each of the machine's 2 GPUs once"
for hiding in 0,0 abc 0,1,2 ''; do  # a GPU twice, no GPU, one GPU too many, none
    run FAKE_GPUS=2 CUDA_VISIBLE_DEVICES="$hiding" -- bash "$scratch/scripts/record-results.sh" --steps lessons \
        --out "$tmp/record"
    expect "record_results_hiding_${hiding:-empty}" 2 "CUDA_VISIBLE_DEVICES='$hiding' does not name each"
done
for every in 1,0 GPU-1,GPU-0; do  # every GPU once, by index or UUID, in any order: taken
    run FAKE_GPUS=2 FAKE_VISIBLE=2 CUDA_VISIBLE_DEVICES="$every" -- bash "$scratch/scripts/record-results.sh" \
        --steps compare-default --out "$tmp/record-$every"
    [[ "$out" != *"does not name each"* ]] || fail "record_results_every_gpu_$every: refused: $out"
done

# ---- compare.sh after the build: CUDA's count must be a number, and 0 is no GPU ----
run FAKE_GPUS=1 FAKE_VISIBLE=junk -- bash "$scratch/scripts/compare.sh" --out "$tmp/compare"
expect compare_count_not_a_number 3 "visible_gpus printed 'junk', not a number of GPUs"
[ "$built" = "configure_and_build default" ] || fail "compare_count_not_a_number: the build was not asked for ($built)"
run FAKE_GPUS=1 FAKE_VISIBLE=0 -- bash "$scratch/scripts/compare.sh" --out "$tmp/compare"
expect compare_cuda_sees_none 3 "compare: no CUDA GPU visible (to CUDA"
run FAKE_GPUS=1 FAKE_VISIBLE= -- bash "$scratch/scripts/compare.sh" --out "$tmp/compare"
expect compare_count_empty 3 "visible_gpus printed '', not a number of GPUs"
run FAKE_GPUS=1 FAKE_VISIBLE=1 FAKE_VISIBLE_EXIT=4 -- bash "$scratch/scripts/compare.sh" --out "$tmp/compare"
expect compare_counter_fails 3 "visible_gpus failed (exit 4), so the GPUs cannot be counted"
# More GPUs asked for than CUDA sees: a bad --gpus, before any run.
run FAKE_GPUS=2 FAKE_VISIBLE=1 -- bash "$scratch/scripts/compare.sh" --out "$tmp/compare" --gpus 1,2
expect compare_gpus_above_visible 2 "--gpus: 2 GPUs asked for, 1 visible"
[ ! -e "$tmp/compare/runs/manifest.tsv" ] || fail "compare_gpus_above_visible: ran before refusing"

# ---- compare.sh's model inputs: 01 with ceil(shots / N) shots for each N (5 shots: 3 on 2 GPUs, 2 on 3) ----
run FAKE_GPUS=3 FAKE_VISIBLE=3 FAKE_SHOTS=5 FAKE_GRADIENT_BYTES=1024 -- bash "$scratch/scripts/compare.sh" \
    --out "$tmp/compare" --gpus 2,3
expect compare_batch_shares 1 "compare: problem default"
batches="$(awk -F'\t' '$1 == "batch" { print $3 }' "$tmp/compare/runs/manifest.tsv" | paste -sd' ')"
[ "$batches" = "3-shots 2-shots" ] || fail "compare_batch_shares: 01's batch runs are '$batches', expected '3-shots 2-shots'"
# A run killed (SIGKILL) before its time limit failed (exit 137); it did not time out.
run FAKE_GPUS=1 FAKE_VISIBLE=1 FAKE_KILLED=1 -- bash "$scratch/scripts/compare.sh" --out "$tmp/compare" --gpus 1
expect compare_run_killed 1 "FAILED (exit 137)"
[ "$(awk -F'\t' 'NR == 2 { print $5 }' "$tmp/compare/runs/manifest.tsv")" = 137 ] ||
    fail "compare_run_killed: 01's status in the manifest is not 137: $(sed -n 2p "$tmp/compare/runs/manifest.tsv")"

# ---- compare.sh with a RESULT of 01 whose shots are null: the table, without the model's inputs ----
run FAKE_GPUS=1 FAKE_VISIBLE=1 -- bash "$scratch/scripts/compare.sh" --out "$tmp/compare" --gpus 1
expect compare_null_shots 1 "gives shots 'None' and gradient_bytes 'None', not positive integers"
[[ "$out" == *"invalid RESULT"* && -f "$tmp/compare/comparison.md" ]] ||
    fail "compare_null_shots: no table with the RESULT's problem, or no comparison.md"

# ---- compare.sh's GPU counts stop at the problem's shots (01's RESULT): more GPUs would have none ----
run FAKE_GPUS=6 FAKE_VISIBLE=6 FAKE_SHOTS=4 -- bash "$scratch/scripts/compare.sh" --out "$tmp/compare"
expect compare_counts_stop_at_shots 1 "has 4 shots, so the GPU counts stop at 4: 1 2 3 4"
[ -f "$tmp/compare/runs/manifest.tsv" ] || fail "compare_counts_stop_at_shots: no manifest of the runs"
! cut -f4 "$tmp/compare/runs/manifest.tsv" | grep -qx '[56]' ||
    fail "compare_counts_stop_at_shots: a run on 5 or 6 GPUs is in the manifest"
run FAKE_GPUS=6 FAKE_VISIBLE=6 FAKE_SHOTS=4 -- bash "$scratch/scripts/compare.sh" --out "$tmp/compare" --gpus 2,6
expect compare_gpus_above_shots 2 "--gpus: the default problem has 4 shots"

# ---- compare.sh warns of other processes on the runs' GPUs (visible_gpus --other-processes), and the
#      table notes them; where they cannot be listed, it says so ----
run FAKE_GPUS=1 FAKE_VISIBLE=1 FAKE_SHOTS=4 -- bash "$scratch/scripts/compare.sh" --out "$tmp/compare" --gpus 1
[[ "$out" != *"other processes"* && ! -e "$tmp/compare/runs/gpu-sharing.txt" ]] &&
    echo "ok:   compare_gpus_idle" || fail "compare_gpus_idle: warned of other processes: $out"
run FAKE_GPUS=1 FAKE_VISIBLE=1 FAKE_SHOTS=4 FAKE_GPU_USERS='GPU 0: pid 4242 (python3, 20.0 GiB)\n' \
    -- bash "$scratch/scripts/compare.sh" --out "$tmp/compare" --gpus 1
expect compare_gpus_shared 1 "compare: warning: other processes on the runs' GPUs before the first run:
  GPU 0: pid 4242 (python3, 20.0 GiB)"
[[ "$out" == *"after the last run:"* ]] || fail "compare_gpus_shared: not looked for after the last run"
[[ "$(cat "$tmp/compare/comparison.txt" 2>&1)" == *"other processes held the runs' GPUs, so if they computed"*"(runs/gpu-sharing.txt): before the first run: GPU 0: pid 4242 (python3, 20.0 GiB); after the last run: GPU 0: pid 4242"* ]] ||
    fail "compare_gpus_shared: no note under the table: $(cat "$tmp/compare/comparison.txt" 2>&1)"
run FAKE_GPUS=1 FAKE_VISIBLE=1 FAKE_SHOTS=4 FAKE_USERS_EXIT=3 -- bash "$scratch/scripts/compare.sh" \
    --out "$tmp/compare" --gpus 1
expect compare_gpus_sharing_unknown 1 "whether other processes use the GPUs before the first run is not known"

# ---- compare.sh names the GPUs the runs use (machine.json) and warns where they are not all one model ----
gpu_json() { printf '{"gpus": [%s]}' "$(printf '{"name": "%s"}, ' "$@" | sed 's/, $//')"; }
run FAKE_GPUS=2 FAKE_VISIBLE=2 FAKE_SHOTS=4 FAKE_ENV_JSON="$(gpu_json "NVIDIA H100 80GB HBM3" "NVIDIA RTX A4000")" \
    -- bash "$scratch/scripts/compare.sh" --out "$tmp/compare" --gpus 1
expect compare_gpu_models_differ 1 "compare: 1 x NVIDIA H100 80GB HBM3, 1 x NVIDIA RTX A4000; logs"
[[ "$out" == *"compare: warning: the GPUs are not all one model"* ]] ||
    fail "compare_gpu_models_differ: no warning: $out"
run FAKE_GPUS=2 FAKE_VISIBLE=2 FAKE_SHOTS=4 FAKE_ENV_JSON="$(gpu_json "NVIDIA H100 80GB HBM3" "NVIDIA H100 80GB HBM3")" \
    -- bash "$scratch/scripts/compare.sh" --out "$tmp/compare" --gpus 1
expect compare_gpu_models_same 1 "compare: 2 x NVIDIA H100 80GB HBM3; logs"
[[ "$out" != *"not all one model"* ]] || fail "compare_gpu_models_same: warned of different models: $out"

# ---- record-results.sh's comparison goes into its new folder of docs/results, which compare.sh refuses
#      to anyone else ----
run FAKE_GPUS=1 FAKE_VISIBLE=1 -- bash "$scratch/scripts/record-results.sh" --steps compare-default
recorded="$(ls -d "$scratch"/docs/results/1xH100-* 2>/dev/null | head -n 1)"
if [ -n "$recorded" ] && [ -f "$recorded/compare-default/comparison.md" ]; then
    echo "ok:   record_results_compare_in_docs_results"
else
    fail "record_results_compare_in_docs_results: no comparison in ${recorded:-a new folder of docs/results}:"
    sed 's/^/    /' <<<"$out"
fi
# The folder is named after the GPUs' model, also where the name has more words than "NVIDIA H100 ..."
# (it was the second word: "GeForce"); MIG instances' lines in nvidia-smi -L are no GPUs of their own.
run FAKE_GPUS=1 FAKE_VISIBLE=1 FAKE_MIG=2 FAKE_GPU_NAME="NVIDIA GeForce RTX 4090" -- \
    bash "$scratch/scripts/record-results.sh" --steps compare-default
if ls -d "$scratch"/docs/results/1xRTX4090-* >/dev/null 2>&1; then
    echo "ok:   record_results_model_and_mig"
else
    fail "record_results_model_and_mig: no folder docs/results/1xRTX4090-*: $(ls "$scratch"/docs/results)"
    sed 's/^/    /' <<<"$out"
fi
rm -rf "$scratch"/docs/results/1xRTX4090-*
run FAKE_GPUS=2 FAKE_MIG=2 CUDA_VISIBLE_DEVICES=0 -- bash "$scratch/scripts/record-results.sh" --steps lessons --out "$tmp/record"
expect record_results_mig_lines_no_gpus 2 "does not name each of the machine's 2 GPUs once"
run -- bash "$scratch/scripts/compare.sh" --out "$recorded/compare-again"
expect compare_refuses_docs_results 2 "is in docs/results, the stored results"
# Results are kept: an --out that exists is refused, as is a step that is not one.
run FAKE_GPUS=1 FAKE_VISIBLE=1 -- bash "$scratch/scripts/record-results.sh" --steps compare-default --out "$recorded"
expect record_results_out_exists 2 "--out: '$recorded' exists; results are kept"
run FAKE_GPUS=1 FAKE_VISIBLE=1 -- bash "$scratch/scripts/record-results.sh" --steps compare-default,bogus --out "$tmp/new"
expect record_results_unknown_step 2 "--steps: 'bogus' is not one of"
[ ! -e "$tmp/new" ] || fail "record_results_unknown_step: made its --out"

# ---- a recording's source.txt names the commit, "-dirty" when the code differs from it, but not for
#      results folders not yet committed (a recording made in parts leaves the earlier parts' folders) ----
printf '/build/\n/.build*.lock\n' >"$scratch/.gitignore"  # as the repository's
git -C "$scratch" init -q && git -C "$scratch" add .gitignore scripts &&
    git -C "$scratch" -c user.name=test -c user.email=test@invalid commit -qm scratch ||
    fail "record_results_source: could not make the scratch repository a git repository"
commit="$(git -C "$scratch" rev-parse --short HEAD)"
run FAKE_GPUS=1 FAKE_VISIBLE=1 -- bash "$scratch/scripts/record-results.sh" --steps compare-default \
    --out "$scratch/docs/results/second-part"
[ "$(cat "$scratch/docs/results/second-part/source.txt" 2>/dev/null)" = "commit: $commit" ] &&
    echo "ok:   record_results_source_beside_uncommitted_results" ||
    fail "record_results_source_beside_uncommitted_results: $(cat "$scratch/docs/results/second-part/source.txt" 2>&1)"
touch "$scratch/scripts/not-committed.sh"
run FAKE_GPUS=1 FAKE_VISIBLE=1 -- bash "$scratch/scripts/record-results.sh" --steps compare-default \
    --out "$scratch/docs/results/after-a-change"
[ "$(cat "$scratch/docs/results/after-a-change/source.txt" 2>/dev/null)" = "commit: $commit-dirty" ] &&
    echo "ok:   record_results_source_dirty" ||
    fail "record_results_source_dirty: $(cat "$scratch/docs/results/after-a-change/source.txt" 2>&1)"
rm "$scratch/scripts/not-committed.sh"

# ---- gpu-check.sh: GPU_CHECK_OUT is checked before the first step; only this run's comparison is copied there ----
run FAKE_GPUS=1 GPU_CHECK_OUT=/proc/x -- bash "$scratch/scripts/gpu-check.sh" build
expect gpu_check_unwritable_out 2 "gpu-check: GPU_CHECK_OUT: cannot create the folder '/proc/x'"
[ -z "$built" ] || fail "gpu_check_unwritable_out: built before refusing GPU_CHECK_OUT ($built)"
run FAKE_GPUS=1 GPU_CHECK_OUT="$scratch/scripts" -- bash "$scratch/scripts/gpu-check.sh" build
expect gpu_check_out_among_repository_files 2 "holds the repository's own files"
run FAKE_GPUS=1 GPU_CHECK_OUT="$scratch/out/gpu-check/copy" -- bash "$scratch/scripts/gpu-check.sh" build
expect gpu_check_out_in_its_logs 2 "is the check's logs folder (out/gpu-check) or inside it"
run FAKE_GPUS=1 GPU_CHECK_OUT="$scratch/docs/results/x" -- bash "$scratch/scripts/gpu-check.sh" build
expect gpu_check_out_in_stored_results 2 "is in the repository but not in out/ or a build folder"
[ -z "$built" ] || fail "gpu_check_out_in_its_logs: built before refusing GPU_CHECK_OUT ($built)"
run FAKE_GPUS=0 GPU_CHECK_OUT="$tmp/check/of/today" -- bash "$scratch/scripts/gpu-check.sh" faults
expect gpu_check_no_gpu 3 "gpu-check: no GPU visible (nvidia-smi fails or does not answer)"
[ ! -e "$tmp/check" ] || fail "gpu_check_no_gpu: left the GPU_CHECK_OUT folder (or its parents) it made to check it"
[ ! -e "$scratch/out" ] || fail "gpu_check_no_gpu: left the logs' folder it made to check it ($(ls -R "$scratch/out"))"
# No nvidia-smi at all: gpu-check and record-results say so, not that it failed. gpu-check also looks for the
# GPUs' device nodes: without them a GPU step is refused at once ...
out="$(env -u CUDA_VISIBLE_DEVICES PATH="$tmp/no-smi" FWI_DEV_DIR="$tmp/dev-none" bash "$scratch/scripts/gpu-check.sh" faults 2>&1)"
code=$?
expect gpu_check_without_nvidia_smi 3 "gpu-check: no GPU visible (nvidia-smi is not installed, and there is no GPU device node such as $tmp/dev-none/nvidia0)"
# ... and with them (a container without NVIDIA's utility capability), CUDA's count decides: the tests step
# says it (ctest, faked, passes).
mkdir -p "$tmp/no-smi-ctest" && cp -P "$tmp/no-smi"/* "$tmp/no-smi-ctest/" && fake "$tmp/no-smi-ctest/ctest" 'exit 0'
for tool in tee flock; do real="$(command -v "$tool")" && ln -sf "$real" "$tmp/no-smi-ctest/$tool"; done
out="$(env -u CUDA_VISIBLE_DEVICES PATH="$tmp/no-smi-ctest" FWI_DEV_DIR="$tmp/dev-gpus" FAKE_VISIBLE=2 bash "$scratch/scripts/gpu-check.sh" tests 2>&1)"
code=$?
expect gpu_check_without_nvidia_smi_device_nodes 0 "gpu-check: CUDA sees 2 GPU(s) (nvidia-smi is not installed to list them)"
# ... where CUDA sees none, the tests step runs (its GPU tests skip), and the faults step fails, as every
# fault test would be skipped.
out="$(env -u CUDA_VISIBLE_DEVICES PATH="$tmp/no-smi-ctest" FWI_DEV_DIR="$tmp/dev-gpus" FAKE_VISIBLE=0 bash "$scratch/scripts/gpu-check.sh" tests 2>&1)"
code=$?
expect gpu_check_without_nvidia_smi_no_gpu_tests 0 "every GPU test will show as skipped"
out="$(env -u CUDA_VISIBLE_DEVICES PATH="$tmp/no-smi-ctest" FWI_DEV_DIR="$tmp/dev-gpus" FAKE_VISIBLE=0 bash "$scratch/scripts/gpu-check.sh" faults 2>&1)"
code=$?
expect gpu_check_without_nvidia_smi_no_gpu_faults 1 "gpu-check: step 'faults' runs on a GPU"
out="$(env -u CUDA_VISIBLE_DEVICES PATH="$tmp/no-smi" bash "$scratch/scripts/record-results.sh" --steps lessons --out "$tmp/record-no-smi" 2>&1)"
code=$?
expect record_results_without_nvidia_smi 3 "record-results: nvidia-smi is not installed"
mkdir -p "$scratch/out/gpu-check/compare"
echo "an earlier run's table" >"$scratch/out/gpu-check/compare/comparison.md"
mkdir "$tmp/gpu-check-out"
run FAKE_GPUS=1 GPU_CHECK_OUT="$tmp/gpu-check-out" OUT="$tmp/someone-elses" -- bash "$scratch/scripts/gpu-check.sh" build
expect gpu_check_build_only 0 "PASS"
# Two of the suite's scripts in one build folder: the second stops at once (exit 3), naming the first, and
# touches nothing (the logs of the check that holds the folder stay). The first's lock goes with it.
bash -c 'source "$1/scripts/common.sh" && lock_build_folder "$1/build" && exec sleep 60' bash "$scratch" &
holder=$!
for _ in $(seq 100); do [ -s "$scratch/.build.lock" ] && break; sleep 0.1; done
run FAKE_GPUS=1 -- bash "$scratch/scripts/gpu-check.sh" build
expect gpu_check_build_folder_in_use 3 "error: another of the suite's scripts is using $scratch/build (process $holder, bash, started"
[ -f "$scratch/out/gpu-check/summary.txt" ] || fail "gpu_check_build_folder_in_use: removed the other check's logs"
kill "$holder" && wait "$holder" 2>/dev/null
run FAKE_GPUS=1 -- bash "$scratch/scripts/gpu-check.sh" build
expect gpu_check_build_folder_free_again 0 "PASS"
# A script that ended while a program it started still runs (and holds the lock it inherited): said so.
bash -c 'source "$1/scripts/common.sh" && lock_build_folder "$1/build" && { sleep 60 & echo $! >"$2"; }' bash "$scratch" \
    "$tmp/orphan.pid"
run FAKE_GPUS=1 -- bash "$scratch/scripts/gpu-check.sh" build
expect gpu_check_lock_held_by_a_leftover_program 3 "that script has ended, but a program it started still holds the lock"
kill "$(cat "$tmp/orphan.pid")"
# A lock file this user cannot write (another user's, opened read-only; here a folder, which even root
# cannot write as a file): the script goes on under set -e, where the failed note of who holds it ended it.
mkdir -p "$tmp/shared/.build.lock"
out="$(bash -c 'set -e; source "$1/scripts/common.sh"; lock_build_folder "$2/build"; echo "went on"' bash "$scratch" "$tmp/shared" 2>&1)"
code=$?
expect lock_file_not_writable 0 "went on"
# A build folder where nothing can be written (here its parent is a file; a read-only clone, as a user):
# exit 3 saying so, before anything is installed or built.
touch "$tmp/not-a-folder"
out="$(bash -c 'source "$1/scripts/common.sh"; require_writable_build_folder "$2/build"; echo "went on"' bash "$scratch" "$tmp/not-a-folder" 2>&1)"
code=$?
expect build_folder_not_writable 3 "error: cannot write '$tmp/not-a-folder', where the scripts build"
# OUT, a name other tools set (Android's build, CI systems), is not gpu-check's: nothing is written there.
[ ! -e "$tmp/someone-elses" ] || fail "gpu_check_leaves_OUT_alone: wrote into OUT ($(ls "$tmp/someone-elses"))"
if [ -f "$tmp/gpu-check-out/summary.txt" ] && [ ! -e "$tmp/gpu-check-out/comparison.md" ]; then
    echo "ok:   gpu_check_no_earlier_comparison"
else
    fail "gpu_check_no_earlier_comparison: in GPU_CHECK_OUT: $(ls "$tmp/gpu-check-out" 2>&1)"
fi

# ---- gpu-check.sh: without a GPU only build and tests run; a step that fails fails the check ----
run FAKE_GPUS=0 -- bash "$scratch/scripts/gpu-check.sh" build faults
expect gpu_check_faults_without_gpu 3 "step 'faults' runs on one"
[ -z "$built" ] || fail "gpu_check_faults_without_gpu: built before refusing ($built)"
# The refused run leaves the last run's logs (gpu_check_build_only's) as they were.
if [ -f "$scratch/out/gpu-check/summary.txt" ] && [ -f "$scratch/out/gpu-check/build.log" ]; then
    echo "ok:   gpu_check_refusal_keeps_logs"
else
    fail "gpu_check_refusal_keeps_logs: in out/gpu-check: $(ls "$scratch/out/gpu-check" 2>&1)"
fi
# compute-sanitizer not on PATH (every folder that has it left out, and CUDA's bin not put back by
# common.sh): the sanitizers step is refused before any step runs.
path_without_sanitizer="$tmp/bin"
IFS=: read -r -a path_folders <<<"$PATH"
for folder in "${path_folders[@]}"; do
    [ -x "$folder/compute-sanitizer" ] || path_without_sanitizer+=":$folder"
done
run FAKE_GPUS=1 PATH="$path_without_sanitizer" FWI_CUDA_BIN="$tmp/no-cuda" -- \
    bash "$scratch/scripts/gpu-check.sh" sanitizers
expect gpu_check_no_sanitizer 3 "compute-sanitizer, which the sanitizers step runs, is not on PATH"
run FAKE_GPUS=1 FAKE_BUILD_FAILS=1 -- bash "$scratch/scripts/gpu-check.sh" build
expect gpu_check_step_fails 1 "FAIL (exit 1)"
# nvidia-smi lists a GPU but CUDA sees none: the tests step fails at its check (ctest, faked, would pass).
fake "$tmp/bin/ctest" 'exit 0'
run FAKE_GPUS=1 FAKE_VISIBLE=0 -- bash "$scratch/scripts/gpu-check.sh" tests
expect gpu_check_cuda_sees_none 1 "nvidia-smi lists GPUs, but CUDA sees none"
# GPUs in exclusive-process compute mode take one process at a time: gpu-check and run-tests run the tests one
# at a time (ctest, faked, logs how it was called); in the default mode, as asked.
fake "$tmp/bin/ctest" "echo \"ctest \$*\" >>\"$calls\""
run FAKE_GPUS=2 FAKE_VISIBLE=2 FAKE_COMPUTE_MODE=Exclusive_Process -- bash "$scratch/scripts/gpu-check.sh" tests
expect gpu_check_exclusive_process 0 "exclusive-process compute mode (nvidia-smi), which takes one process at a time"
[[ "$built" == *"ctest --preset default -E fault -j1 "* ]] || fail "gpu_check_exclusive_process: ctest was called: $built"
run FAKE_GPUS=2 FAKE_VISIBLE=2 -- bash "$scratch/scripts/gpu-check.sh" tests
[[ "$built" == *"ctest --preset default -E fault -j3 "* ]] || fail "gpu_check_default_mode: ctest was called: $built"
# (No -L or -R here: the scratch repository has no cmake/ to check their regexes with.)
run FAKE_GPUS=2 FAKE_COMPUTE_MODE=Exclusive_Process -- bash "$scratch/scripts/run-tests.sh" --parallel 4 --output-on-failure
expect run_tests_exclusive_process 0 "the tests run one at a time"
[[ "$built" == *"ctest --preset default --output-on-failure" ]] || fail "run_tests_exclusive_process: ctest was called: $built"
run FAKE_GPUS=2 FAKE_COMPUTE_MODE=Exclusive_Process -- bash "$scratch/scripts/run-tests.sh" -j4
[[ "$built" == *"ctest --preset default" ]] || fail "run_tests_exclusive_process_jN: ctest was called: $built"
run FAKE_GPUS=2 -- bash "$scratch/scripts/run-tests.sh" -j 4 --output-on-failure
[[ "$built" == *"ctest --preset default -j 4 --output-on-failure" ]] ||
    fail "run_tests_default_mode: ctest was called: $built"
rm "$tmp/bin/ctest"

# ---- gpu-check.sh where its logs cannot go (a file named out in the checkout): exit 3 before any step ----
mkdir -p "$tmp/no-logs"
cp -r "$scratch/scripts" "$tmp/no-logs/"
echo "not a folder" >"$tmp/no-logs/out"
run FAKE_GPUS=1 -- bash "$tmp/no-logs/scripts/gpu-check.sh" build
expect gpu_check_logs_unwritable 3 "gpu-check: the logs go to out/gpu-check, but cannot create the folder"
[ -z "$built" ] || fail "gpu_check_logs_unwritable: built before refusing ($built)"

# ---- sanitize.sh in a repository whose path holds a space: exit 3 (move the clone) before anything is
#      installed or built ----
mkdir -p "$tmp/a repo"
cp -r "$repo/scripts" "$tmp/a repo/"
run -- bash "$tmp/a repo/scripts/sanitize.sh"
expect sanitize_path_with_a_space 3 "holds a space, comma or colon, which the sanitizers' log path cannot"
[ ! -e "$tmp/a repo/build-asan" ] || fail "sanitize_path_with_a_space: made build-asan before refusing"

# ---- record-results.sh writes each command as a line that can be pasted, words quoted where they need it
#      (last: its build step deletes the scratch build/ with the fake programs) ----
run FAKE_GPUS=1 FAKE_VISIBLE=1 -- bash "$scratch/scripts/record-results.sh" --steps build --out "$tmp/built"
quoted='bash -c source\ \"\$1/scripts/common.sh\"\ \&\&\ configure_and_build\ default bash .'  # the paths made relative
if [ "$code" -eq 0 ] && [ "$(head -n 1 "$tmp/built/build.log" 2>/dev/null)" = "\$ $quoted" ] &&
    grep -qxF "$quoted" <(cut -f 4 "$tmp/built/timings.tsv" 2>/dev/null); then
    echo "ok:   record_results_commands_quoted"
else
    fail "record_results_commands_quoted: exit $code; build.log and timings.tsv begin:"
    head -n 1 "$tmp/built/build.log" "$tmp/built/timings.tsv" 2>&1 | sed 's/^/    /'
fi

# ---- through a symbolic link: the scripts find common.sh where they are, not where the link is ----
mkdir "$tmp/links"
for script in compare.sh gpu-check.sh record-results.sh run-tests.sh run-main.sh cluster/hostfile-run.sh; do
    ln -s "$repo/scripts/$script" "$tmp/links/${script#cluster/}"
    run -- "$tmp/links/${script#cluster/}" --help
    expect "$script --help through a link" 0 ""
    [ -n "$out" ] || fail "$script --help through a link printed nothing"
done

if [ "$failures" -ne 0 ]; then
    echo "$failures check(s) failed"
    exit 1
fi
echo "all checks passed"
