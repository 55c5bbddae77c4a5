#!/usr/bin/env bash
# Builds the suite and runs every test. Tests that need a GPU (or more GPUs than are visible) exit 77
# and show as skipped, never as passed.
#
# usage: scripts/run-tests.sh [CTEST OPTIONS...]   e.g. -L cpu (the tests that need no GPU), -R fault
#   These are passed to ctest:
#   -L REGEX, -LE REGEX   the tests with (-L) or without (-LE) a label matching REGEX (cpu, gpu, multigpu,
#                         mpi); each may be given more than once (ctest takes the tests matching all)
#   -R REGEX, -E REGEX    the tests whose name matches (-R) or does not match (-E) REGEX
#   -j N, -jN, --parallel N   N tests at a time (one at a time where nvidia-smi shows a GPU in exclusive-process
#                         compute mode, which takes one process at a time)
#   --timeout S           seconds a test may run where it sets no limit of its own
#   --repeat MODE:N       MODE until-fail, until-pass or after-timeout, at most N runs of each test
#   --output-on-failure, -V, -VV, --rerun-failed, --stop-on-failure, -N (list the tests, run none)
# Anything else is refused (exit 2) before anything is installed or built: an unknown flag, a missing
# or empty value, a bare word, a flag given twice (-j and --parallel count as one), a REGEX that does not
# compile (as an extended regular expression), and --preset, --test-dir and -C (--build-config), which are this
# script's (it builds and tests the default preset in build/; run ctest yourself for another).
set -euo pipefail
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/common.sh" || exit 3
export FWI_NEEDS_TEST_TOOLS=1  # doctest and Google Benchmark: the tests and benchmarks it runs need them

bad_flag() { echo "run-tests: $1 (scripts/run-tests.sh --help lists what it passes to ctest)" >&2; exit 2; }

for arg in "$@"; do
    is_one_of "$arg" -h --help && { print_help "${BASH_SOURCE[0]}"; exit 0; }
done
ctest_args=("$@")
while [ $# -gt 0 ]; do
    case "$1" in
        -L|-LE|-R|-E|-j|--parallel|--timeout|--repeat)
            [ $# -ge 2 ] || bad_flag "$1: missing value"
            [ -n "$2" ] || bad_flag "$1: needs a non-empty value"
            if [[ "$2" == -* ]]; then
                is_one_of "$1" -L -LE -R -E &&
                    bad_flag "$1: '$2' is a flag, not a value (a regex that starts with - can be given as [-]...)"
                bad_flag "$1: '$2' is a flag, not a value"
            fi
            # ctest takes the tests matching every -L (or -LE) given; of the others it would keep one (-j and
            # --parallel are one option).
            if ! is_one_of "$1" -L -LE && ! first_time "${1/--parallel/-j}"; then
                is_one_of "$1" -j --parallel && bad_flag "$1 given twice (-j and --parallel are one option)"
                bad_flag "$1 given twice"
            fi
            case "$1" in
                -L|-LE|-R|-E)
                    # Checked before the build, which ctest would refuse only after it: as an extended regular
                    # expression (status 2: it does not compile, e.g. an unmatched bracket), and where CMake is
                    # installed already, by CMake's own regular expressions, which ctest uses and which refuse
                    # more (a nested repeat, 'a**').
                    regex_status=0
                    [[ "" =~ $2 ]] || regex_status=$?
                    [ "$regex_status" -ne 2 ] || bad_flag "$1: '$2' is not a regular expression (an unmatched bracket or parenthesis?)"
                    if command -v cmake >/dev/null 2>&1 && ! cmake "-DREGEX=$2" -P "$ROOT/cmake/check_regex.cmake" >/dev/null 2>&1; then
                        bad_flag "$1: '$2' is not a regular expression ctest takes (a nested repeat such as '**' or '+*'?)"
                    fi ;;
                -j|--parallel) [[ "$2" =~ ^[1-9][0-9]{0,3}$ ]] || bad_flag "$1: '$2' is not a number of tests in 1..9999" ;;
                --timeout) [[ "$2" =~ ^[1-9][0-9]{0,5}$ ]] || bad_flag "--timeout: '$2' is not a number of seconds in 1..999999" ;;
                --repeat) [[ "$2" =~ ^(until-fail|until-pass|after-timeout):[1-9][0-9]{0,3}$ ]] ||
                    bad_flag "--repeat: '$2' is not MODE:N (MODE until-fail, until-pass or after-timeout; N in 1..9999)" ;;
            esac
            shift 2 ;;
        -j*)
            [[ "$1" =~ ^-j[1-9][0-9]{0,3}$ ]] || bad_flag "-j: '${1#-j}' is not a number of tests in 1..9999"
            first_time -j || bad_flag "-j given twice (-j and --parallel are one option)"
            shift ;;
        --output-on-failure|-V|-VV|--rerun-failed|--stop-on-failure|-N)
            first_time "$1" || bad_flag "$1 given twice"
            shift ;;
        --preset|--preset=*|--test-dir|--test-dir=*|-C|-C*|--build-config|--build-config=*)
            bad_flag "${1%%=*} is the script's own: it builds and tests the default preset in build/; run ctest yourself for another" ;;
        -*) bad_flag "unknown flag '$1'" ;;
        *) bad_flag "'$1' is not a flag (a test's name goes after -R)" ;;
    esac
done
configure_and_build default
cd "$ROOT"
# A GPU in exclusive-process compute mode takes one process at a time: tests run at once would fail each
# other there, so -j and --parallel give way to one at a time.
if gpus_take_one_process; then
    one_at_a_time=()
    for ((i = 0; i < ${#ctest_args[@]}; i++)); do
        case "${ctest_args[i]}" in
            -j | --parallel) i=$((i + 1)) ;;
            -j*) ;;
            *) one_at_a_time+=("${ctest_args[i]}") ;;
        esac
    done
    if [ ${#one_at_a_time[@]} -ne ${#ctest_args[@]} ]; then
        echo "run-tests: a GPU is in exclusive-process compute mode (nvidia-smi), which takes one process at a" \
             "time: the tests run one at a time"
        ctest_args=(${one_at_a_time[@]+"${one_at_a_time[@]}"})  # (bash before 4.4: an empty array is unset)
    fi
fi
ctest --preset default ${ctest_args[@]+"${ctest_args[@]}"}
