#!/usr/bin/env bash
# A build folder's first configure that fails (CUDAARCHS=10, an architecture no CUDA compiler builds) leaves
# no cache behind in scripts/common.sh's configure_and_build: CMake would otherwise keep that CUDAARCHS for
# every later configure of the folder, made without it too. Runs on a copy of the sources (the build folder
# is the default preset's, inside them); needs no GPU.
#
# usage: tests/failed_configure_test.sh SOURCE_DIR     exit 0 when the cache is gone and the script says so
set -uo pipefail
src="$1"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT  # ours, from mktemp
tar -C "$src" --exclude=./build --exclude='./build-*' --exclude=./out --exclude=./.git --exclude=./docs/results \
    -cf - . | tar -C "$work" -xf - || { echo "could not copy the sources"; exit 1; }
# (FWI_INSTALL_DRY_RUN: a package missing is said, not installed, from inside a test.)
out="$(cd "$work" && CUDAARCHS=10 FWI_INSTALL_DRY_RUN=1 bash -c 'source scripts/common.sh && configure_and_build default' 2>&1)"
code=$?
if [ $code -ne 0 ] && [[ "$out" == *"its cache was removed, so the next configure starts afresh"* ]] &&
    [ ! -e "$work/build/CMakeCache.txt" ]; then
    echo "ok: the failed first configure (exit $code) left no cache"
    exit 0
fi
echo "FAIL: exit $code; build/CMakeCache.txt $([ -e "$work/build/CMakeCache.txt" ] && echo kept || echo gone); output:"
echo "$out" | tail -n 20
exit 1
