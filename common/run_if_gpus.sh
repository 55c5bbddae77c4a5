#!/usr/bin/env bash
# Usage: run_if_gpus.sh VISIBLE_GPUS_PROGRAM MIN_GPUS COMMAND [ARG...]
# Runs COMMAND when at least MIN_GPUS GPUs are visible, else exits 77 (skipped in CTest). Exit 2 for bad
# usage; 3 when the counter (visible_gpus) cannot run, does not answer within 60 s or prints no number:
# a broken build fails its GPU tests instead of skipping them.
set -u
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../scripts/common.sh" || exit 3
if is_one_of "${1:-}" -h --help; then
    print_help "${BASH_SOURCE[0]}"
    exit 0
fi
if [ $# -lt 3 ] || ! [[ "$2" =~ ^[1-9][0-9]{0,2}$ ]]; then
    echo "run_if_gpus: usage: run_if_gpus.sh VISIBLE_GPUS_PROGRAM MIN_GPUS COMMAND [ARG...] (MIN_GPUS in 1..999)" >&2
    exit 2
fi
visible_gpus=$1
needed=$2
shift 2
have=$(count_visible_gpus "$visible_gpus") || exit 3
if [ "$have" -lt "$needed" ]; then
    echo "needs $needed GPU(s), $have visible: skipped"
    exit 77
fi
exec "$@"
