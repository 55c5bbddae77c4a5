#!/usr/bin/env bash
# The suite's main job on the GPUs present: builds everything, then runs the cross-pattern comparison
# (scripts/compare.sh: 01, 03, 04, 05 and 06 on the same problem for 1 to all GPUs, one table and a
# chart). Flags are passed on (e.g. --problem large). Without a GPU it says so in one line and exits 3,
# before it builds.
case "${1:-}" in
    # Where this line cannot be written, compare.sh's --help says so (exit 3).
    -h|--help) printf '%s\n\n' "scripts/run-main.sh: the main job, scripts/compare.sh; it takes compare.sh's flags:" 2>/dev/null ;;
esac
exec "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/compare.sh" "$@"
