#!/usr/bin/env bash
# Builds the suite and runs every test. Tests that need a GPU (or more GPUs than are visible) exit 77
# and show as skipped, never as passed. Extra arguments go to ctest (e.g. -L cpu).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
preset="$(choose_preset)"
configure_and_build "$preset"
cd "$ROOT"
ctest --preset "$preset" "$@"
