#!/usr/bin/env bash
# Runs doctor (or mpirun ... doctor) as a CTest test and checks what it did:
#   run_doctor_test.sh --visible-gpus PROGRAM [--min-gpus N] [--needs-peer-access] [--needs-one-model]
#                      [--needs-idle-gpus] [--first-gpu-only] [--shares-a-gpu] [--rank0-gpus N]
#                      [--may-warn IDS] [--exit CODE] [--max-seconds S] [--expect TEXT]... [--pass IDS]
#                      [--warn IDS] -- COMMAND...
# The command gets `--json FILE` appended. With --first-gpu-only it sees only the first of the GPUs the test
# was given (CUDA_VISIBLE_DEVICES's first entry, GPU 0 where it is unset): a user's own choice of GPUs holds.
# The test is skipped (exit 77) with fewer than N GPUs visible, and with --needs-peer-access where a pair of
# GPUs has no peer access (PCIe cards without P2P, a server with more GPUs than one can reach): both asked
# of PROGRAM (common/visible_gpus), not of doctor, whose count and peer access are what the tests test; a
# doctor whose count differs from PROGRAM's fails. With --shares-a-gpu (a test that puts two ranks on one
# GPU) it is skipped where nvidia-smi shows a GPU in exclusive-process compute mode, which takes one process
# at a time. With --needs-one-model where the GPUs are not all one model, and with --needs-idle-gpus where
# check 1 found another process on them (someone else's job): what those tests expect holds only on such
# machines. Then: the exit code must be CODE, the run must end within S seconds (wall clock), every TEXT must
# appear in the output, and every check in the IDS of --pass (a comma list) must be PASS, every one in those
# of --warn WARN; a check in the IDS of --may-warn may WARN where --pass asks for PASS (check 1 does on many
# healthy machines: a driver older than the build's CUDA, a PCIe link below its widest, a GPU in MIG mode,
# held back by its clocks or below its default power limit), and the other checks are judged all the same. doctor must count the GPUs PROGRAM counts, or N with --rank0-gpus
# (a test that gives each rank GPUs of its own, so that rank 0, which reports, sees N of them).
set -uo pipefail
visible_gpus="" shares_a_gpu=0 min_gpus=0 needs_peer_access=0 needs_one_model=0 needs_idle_gpus=0 expected_exit=0 max_seconds=60 pass_ids="" warn_ids=""
may_warn="" first_gpu_only=0 rank0_gpus=""
expected=()
while [ $# -gt 0 ]; do
    case "$1" in
        --visible-gpus) visible_gpus="$2"; shift 2 ;;
        --min-gpus) min_gpus="$2"; shift 2 ;;
        --needs-peer-access) needs_peer_access=1; shift ;;
        --needs-one-model) needs_one_model=1; shift ;;
        --needs-idle-gpus) needs_idle_gpus=1; shift ;;
        --may-warn) may_warn="$2"; shift 2 ;;
        --first-gpu-only) first_gpu_only=1; shift ;;
        --shares-a-gpu) shares_a_gpu=1; shift ;;
        --rank0-gpus) rank0_gpus="$2"; shift 2 ;;
        --exit) expected_exit="$2"; shift 2 ;;
        --max-seconds) max_seconds="$2"; shift 2 ;;
        --expect) expected+=("$2"); shift 2 ;;
        --pass) pass_ids="$2"; shift 2 ;;
        --warn) warn_ids="$2"; shift 2 ;;
        --) shift; break ;;
        *) echo "run_doctor_test.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
[ -n "$visible_gpus" ] || { echo "run_doctor_test.sh: --visible-gpus PROGRAM is required" >&2; exit 2; }
if [ "$first_gpu_only" -eq 1 ]; then
    visible="${CUDA_VISIBLE_DEVICES-0}"
    export CUDA_VISIBLE_DEVICES="${visible%%,*}"
fi
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../scripts/common.sh" || exit 3
cuda_gpus=$(count_visible_gpus "$visible_gpus") || exit 3  # a broken counter fails the test
if [ "$cuda_gpus" -lt "$min_gpus" ]; then
    echo "SKIPPED: needs $min_gpus GPU(s), $cuda_gpus visible"
    exit 77
fi
[ "$shares_a_gpu" -eq 0 ] || skip_where_gpus_take_one_process "this test puts two ranks on one"
if [ "$needs_peer_access" -eq 1 ]; then
    peer_access=$(quick_query "$visible_gpus" --peer-access) || { echo "FAILED: $visible_gpus --peer-access"; exit 1; }
    if [ "$peer_access" != 1 ]; then
        echo "SKIPPED: a pair of GPUs has no peer access (cudaDeviceCanAccessPeer); this test needs every pair to have it"
        exit 77
    fi
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
json="$work/doctor.json"

start_ms=$(($(date +%s%N) / 1000000))
# A doctor that hangs must fail this test, not stall CTest: kill it well after its own limit.
timeout --kill-after=10 $((max_seconds + 60)) "$@" --json "$json" >"$work/output" 2>&1
code=$?
elapsed_ms=$(($(date +%s%N) / 1000000 - start_ms))
cat "$work/output"
echo "--- exit code $code after $((elapsed_ms / 1000)).$(printf '%03d' $((elapsed_ms % 1000))) s"

if [ ! -s "$json" ]; then
    echo "FAILED: doctor wrote no JSON (killed, crashed or hung?)"
    exit 1
fi
# status_of ID: the status check ID ended in (PASS, WARN, FAIL, SKIP; empty where it is not in the JSON).
status_of() {
    grep -o "\"$1\": {\"number\": [0-9]*, \"title\": \"[^\"]*\", \"status\": \"[A-Z]*\"" "$json" |
        grep -o '[A-Z]*"$' | tr -d '"'
}
gpus=$(grep -o '"gpus": [0-9]*' "$json" | head -n 1 | grep -o '[0-9]*$')
if [ -z "$gpus" ]; then  # a JSON without the count is a broken doctor, not a machine without GPUs
    echo "FAILED: doctor's JSON has no \"gpus\" count"
    exit 1
fi
if [ -n "$rank0_gpus" ] && [ "$gpus" -ne "$rank0_gpus" ]; then
    echo "FAILED: doctor's rank 0 counted $gpus GPU(s), expected $rank0_gpus (check 1: $(status_of devices))"
    exit 1
fi
if [ -z "$rank0_gpus" ] && [ "$gpus" -ne "$cuda_gpus" ]; then
    echo "FAILED: doctor counted $gpus GPU(s), CUDA has $cuda_gpus visible (check 1: $(status_of devices))"
    exit 1
fi
# Check 1's devices, one "name" each (the env's list of GPUs repeats them).
if [ "$needs_one_model" -eq 1 ] && [ "$(grep -o '"name": "[^"]*"' "$json" | sort -u | wc -l)" -gt 1 ]; then
    echo "SKIPPED: the GPUs are not all one model (see check 1); this test needs them to be"
    exit 77
fi
# Check 1's other processes: a named or unnamed one is an object in its list. The tests that need idle
# GPUs run alone (RUN_SERIAL), so a doctor among them is this one, left in by a bug: that fails, where
# someone else's job skips.
if [ "$needs_idle_gpus" -eq 1 ]; then
    if grep -q '"process": "doctor"' "$json"; then
        echo "FAILED: check 1 lists doctor itself among the other processes"
        exit 1
    fi
    if grep -Eq '"(named|unnamed)": \[\{' "$json"; then
        echo "SKIPPED: another process is on the GPUs (see check 1); this test needs them idle"
        exit 77
    fi
fi
failed=0
if [ "$code" -ne "$expected_exit" ]; then
    echo "FAILED: exit code $code, expected $expected_exit"
    failed=1
fi
if [ "$elapsed_ms" -gt $((max_seconds * 1000)) ]; then
    echo "FAILED: took more than $max_seconds s"
    failed=1
fi
for text in "${expected[@]}"; do
    if ! grep -qF -- "$text" "$work/output"; then
        echo "FAILED: the output does not contain: $text"
        failed=1
    fi
done
# expect_status STATUS IDS: every check in IDS (a comma list) ended in STATUS (or WARN, for a PASS asked of
# a check in --may-warn's IDS).
expect_status() {
    local id status
    for id in ${2//,/ }; do
        status="$(status_of "$id")"
        if [ "$1" = PASS ] && [ "$status" = WARN ] && [[ ",$may_warn," == *",$id,"* ]]; then
            echo "note: check $id warns on this machine (see its finding above), which --may-warn accepts"
        elif [ "$status" != "$1" ]; then
            echo "FAILED: check $id is ${status:-missing}, expected $1"
            failed=1
        fi
    done
}
expect_status PASS "$pass_ids"
expect_status WARN "$warn_ids"
[ $failed -eq 0 ] && echo "PASSED"
exit $failed
