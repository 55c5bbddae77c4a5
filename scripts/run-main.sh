#!/usr/bin/env bash
# The suite's main job on the GPUs present: builds everything, then runs it. For now that is
# 01_single_gpu on the default problem; flags are passed on (e.g. --problem small --iterations 3).
# Without a GPU it says so in one line and exits 3.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
preset="$(choose_preset)"
configure_and_build "$preset"
cd "$ROOT"
exec "$(build_dir "$preset")/01_single_gpu/01_single_gpu" "$@"
