#!/usr/bin/env bash
# Usage: run_if_gpus.sh VISIBLE_GPUS_PROGRAM MIN_GPUS COMMAND [ARG...]
# Runs COMMAND when at least MIN_GPUS GPUs are visible, else exits 77 (skipped in CTest).
set -u
visible_gpus=$1
needed=$2
shift 2
have=$("$visible_gpus") || have=0
if [ "$have" -lt "$needed" ]; then
    echo "needs $needed GPU(s), $have visible: skipped"
    exit 77
fi
exec "$@"
