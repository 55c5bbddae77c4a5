#!/usr/bin/env bash
# Builds the suite and runs every test. Tests that need a GPU (or more GPUs than are visible) exit 77
# and show as skipped, never as passed. Extra arguments go to ctest (e.g. -L cpu).
#
# usage: scripts/run-tests.sh [CTEST ARGUMENTS...]   e.g. -L cpu (the tests that need no GPU), -R fault
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
case "${1:-}" in
    -h|--help) print_help "${BASH_SOURCE[0]}"; exit 0 ;;
esac
configure_and_build default
cd "$ROOT"
ctest --preset default "$@"
