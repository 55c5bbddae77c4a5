#!/usr/bin/env bash
# What scripts/common.sh's install_missing_packages decides on a fresh machine, without installing
# anything: fake cmake, nvcc, mpicxx, mpirun, g++, python3 and apt-cache (shell scripts printing a
# version) first on PATH, temporary include folders in place of the system ones (FWI_NCCL_SEARCH_DIRS,
# FWI_INCLUDE_DIRS), and the plan printed instead of run (FWI_INSTALL_DRY_RUN=1); scripts/run-tests.sh
# through it to a fake cmake and ctest (what it passes on, what it refuses); the last cases run it
# for real against a fake apt-get and sudo (a fresh machine's apt-get update). No GPU, no root.
#
# usage: tests/scripts_detection_test.sh [REPO_ROOT]     exit 0 when every case passes
set -uo pipefail
repo="${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
common="$repo/scripts/common.sh"
[ -f "$common" ] || { echo "no $common" >&2; exit 1; }

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
bin="$tmp/bin"         # the fake tools (the CUDA toolkit's include folder is then $tmp/include)
sys="$tmp/sys/include" # stands for /usr/include and the other system folders
mkdir -p "$bin" "$sys/doctest" "$sys/benchmark" "$tmp/tools"
# PATH is the fake tools and links to the few real utilities common.sh and they use, nothing else: a real
# cmake or mpirun of this machine must not be seen.
for tool in dirname sed head sort tr readlink grep id cat touch nproc timeout env uname; do
    real="$(command -v "$tool")" || { echo "this test needs $tool" >&2; exit 1; }
    ln -s "$real" "$tmp/tools/$tool"
done
fake_path="$bin:$tmp/tools"
touch "$sys/doctest/doctest.h" "$sys/benchmark/benchmark.h"

# fake NAME BODY: an executable shell script on the fake PATH.
fake() { printf '#!/bin/sh\n%s\n' "$2" >"$bin/$1" && chmod +x "$bin/$1"; }
# The versions come from the environment, so each case sets only what it changes.
# cmake and ctest log any other call but a script's (-P) in FAKE_CALLS (scripts/run-tests.sh's build and test).
export FAKE_CALLS="$tmp/calls.log"
fake ctest 'echo "ctest $*" >>"$FAKE_CALLS"'
fake cmake 'case " $* " in *" -P "*) exit 0 ;; esac  # a script, such as run-tests.sh'"'"'s check of a regex
[ "$1" = --version ] || { echo "cmake $*" >>"$FAKE_CALLS"; exit 0; }
echo "cmake version ${FAKE_CMAKE_VERSION:-3.28.3}"; echo; echo "CMake suite maintained and supported by Kitware (kitware.com/cmake)."'
fake nvcc 'echo "nvcc: NVIDIA (R) Cuda compiler driver"
echo "Copyright (c) 2005-2024 NVIDIA Corporation"
echo "Cuda compilation tools, release ${FAKE_CUDA_VERSION:-12.8}, V${FAKE_CUDA_VERSION:-12.8}.93"
echo "Build cuda_${FAKE_CUDA_VERSION:-12.8}.r12.8/compiler.35583870_0"'
fake mpicxx 'echo "g++ (Ubuntu 13.3.0-6ubuntu2~24.04) 13.3.0"'
fake mpirun 'echo "mpirun (Open MPI) 4.1.6"'
fake g++ 'echo "g++ (Ubuntu 13.3.0-6ubuntu2~24.04) 13.3.0"'
fake python3 'exit 0' # "import matplotlib" succeeds
fake make 'exit 0'
# apt-cache policy: for cmake, FAKE_APT_CMAKE as its candidate where set. For libnccl-dev (or any other
# name): nothing for a name apt does not know (what the real one prints), a candidate when
# FAKE_APT_NCCL=yes or after the fake apt-get update listed it, "Candidate: (none)" when
# FAKE_APT_NCCL=none (known but not installable), an old one (old), one with an epoch (epoch).
# apt-cache madison: the builds of NVIDIA's repository when FAKE_APT_MADISON=yes, only those for CUDA 13 when
# FAKE_APT_MADISON=cuda13, else nothing.
apt_cache='[ -e "$FAKE_APT_LISTED" ] && FAKE_APT_NCCL=listed
if [ "$1 $2" = "policy cmake" ]; then
  [ -e "$FAKE_APT_LISTED" ] && [ -n "${FAKE_APT_UPDATE_ADDS_CMAKE:-}" ] && FAKE_APT_CMAKE="$FAKE_APT_UPDATE_ADDS_CMAKE"
  [ -z "${FAKE_APT_CMAKE:-}" ] || printf "cmake:\n  Installed: (none)\n  Candidate: %s\n" "$FAKE_APT_CMAKE"
  exit 0
fi
if [ "$1" = madison ]; then
  builds="2.28.3-1+cuda13.0 2.28.3-1+cuda12.9 2.27.7-1+cuda12.9 2.27.7-1+cuda13.0"
  case "${FAKE_APT_MADISON:-no}" in yes) ;; cuda13) builds="2.28.3-1+cuda13.0 2.27.7-1+cuda13.0" ;; *) exit 0 ;; esac
  for build in $builds; do
    printf " libnccl-dev | %s | https://developer.download.nvidia.com/compute/cuda/repos  Packages\n" "$build"
  done
  exit 0
fi
case "${FAKE_APT_NCCL:-no}" in
  yes|listed) printf "libnccl-dev:\n  Installed: (none)\n  Candidate: 2.28.3-1+cuda12.8\n  Version table:\n     2.28.3-1+cuda12.8 500\n" ;;
  old) printf "libnccl-dev:\n  Installed: (none)\n  Candidate: 2.11.4-1\n  Version table:\n     2.11.4-1 500\n" ;;
  epoch) printf "libnccl-dev:\n  Installed: (none)\n  Candidate: 1:2.21.5-1\n  Version table:\n" ;;
  none) printf "libnccl-dev:\n  Installed: (none)\n  Candidate: (none)\n  Version table:\n" ;;
esac
exit 0'
fake apt-cache "$apt_cache"
# dpkg-query: libnccl2 installed (held, as in NVIDIA's CUDA images) at FAKE_LIBNCCL2 where set, else not.
fake dpkg-query '[ -n "${FAKE_LIBNCCL2:-}" ] || { echo "dpkg-query: no packages found matching libnccl2" >&2; exit 1; }
printf "hold ok installed|%s\\n" "$FAKE_LIBNCCL2"; printf "hold ok installed|%s\\n" "$FAKE_LIBNCCL2"'
# apt-get logs its calls; its update makes libnccl-dev known when FAKE_APT_UPDATE_ADDS_NCCL=yes (a fresh
# machine whose lists were never fetched), and cmake of version FAKE_APT_UPDATE_ADDS_CMAKE where set, and fails as without a network when FAKE_APT_UPDATE_FAILS=yes;
# its install always fails; its update fails on the lists' lock as many times as $tmp/lock-left says (another
# apt running). sudo runs what it is given.
export FAKE_APT_LISTED="$tmp/nccl-listed"
fake apt-get "echo \"\$*\" >>'$tmp/apt-get.log'
[ \"\$1\" = update ] && [ \"\$(cat '$tmp/lock-left' 2>/dev/null || echo 0)\" -gt 0 ] &&
  { echo \$((\$(cat '$tmp/lock-left') - 1)) >'$tmp/lock-left'
    echo 'E: Could not get lock /var/lib/apt/lists/lock. It is held by process 812 (apt-get)' >&2
    echo 'E: Unable to lock directory /var/lib/apt/lists/' >&2; exit 100; }
[ \"\$1\" = update ] && [ \"\${FAKE_APT_UPDATE_FAILS:-no}\" = yes ] &&
  { echo 'Err:1 http://archive.ubuntu.com/ubuntu noble InRelease' >&2
    echo 'E: Failed to fetch http://archive.ubuntu.com/ubuntu/dists/noble/InRelease  Temporary failure resolving' >&2
    echo 'E: Some index files failed to download. They have been ignored, or old ones used instead.' >&2; exit 100; }
[ \"\$1\" = update ] && [ \"\${FAKE_APT_UPDATE_WARNS:-no}\" = yes ] &&
  { echo 'W: Failed to fetch https://developer.download.nvidia.com/compute/cuda/repos/InRelease  Could not resolve host' >&2; exit 0; }
[ \"\$1\" = update ] && { [ \"\${FAKE_APT_UPDATE_ADDS_NCCL:-no}\" = yes ] || [ -n \"\${FAKE_APT_UPDATE_ADDS_CMAKE:-}\" ]; } &&
  touch \"\$FAKE_APT_LISTED\"
[ \"\$1\" = update ]"
# sudo logs that it was used (in FAKE_SUDO_LOG), then runs what it is given.
export FAKE_SUDO_LOG="$tmp/sudo.log"
fake sudo 'echo sudo >>"$FAKE_SUDO_LOG"; "$@"'

# nccl_header DIR VERSION: a minimal nccl.h of that version in DIR.
nccl_header() {
    local -a v
    IFS=. read -r -a v <<<"$2"
    mkdir -p "$1"
    printf '#define NCCL_MAJOR %s\n#define NCCL_MINOR %s\n#define NCCL_PATCH %s\n' "${v[0]}" "${v[1]}" "${v[2]}" >"$1/nccl.h"
}

failures=0
out="" code=0
# detect [VAR=VALUE...]: runs install_missing_packages as scripts/run-tests.sh does (set -euo pipefail,
# common.sh sourced), in a dry run, with the fake PATH and the given environment; sets out and code. As the
# main job does (FWI_NEEDS_TEST_TOOLS unset), and with no CUDA toolkit in the usual place (FWI_CUDA_BIN).
detect() {
    out="$(env -u NCCL_ROOT -u NCCL_HOME -u CUDA_PATH -u CUDA_HOME -u CUDAToolkit_ROOT -u CUDACXX -u CMAKE_PREFIX_PATH \
               -u FWI_NEEDS_TEST_TOOLS PATH="$fake_path" FWI_CUDA_BIN="$tmp/no-cuda" FWI_INSTALL_DRY_RUN=1 \
               FWI_NCCL_SEARCH_DIRS="$sys" FWI_INCLUDE_DIRS="$sys" "$@" \
               "$BASH" -c 'set -euo pipefail; source "$1"; install_missing_packages' bash "$common" 2>&1)"
    code=$?
}
# check NAME EXPECTED_CODE REGEX [REGEX_THAT_MUST_NOT_MATCH]
check() {
    local name="$1" want="$2" regex="$3" not="${4:-}"
    if [ "$code" -ne "$want" ] || ! grep -Eq -- "$regex" <<<"$out" || { [ -n "$not" ] && grep -Eq -- "$not" <<<"$out"; }; then
        echo "FAIL $name: exit $code (expected $want), output:"
        sed 's/^/    /' <<<"$out"
        [ -n "$not" ] && echo "    (must match /$regex/, must not match /$not/)" || echo "    (must match /$regex/)"
        failures=$((failures + 1))
    else
        echo "ok   $name: exit $code: $(head -c 160 <<<"$out" | tr '\n' ' ')"
    fi
}

# (a) NCCL absent, apt knows libnccl-dev: the plan installs it (and only it). A dry run with something to
# install stops there (exit 3): the build would fail without it.
detect FAKE_APT_NCCL=yes
check "nccl_absent_package_available" 3 '^would install: libnccl-dev$'

# (b) NCCL absent, no package: exit 3, one message naming libnccl-dev and NCCL_ROOT.
# ... from NVIDIA's repository, which builds each NCCL for several CUDA versions: the build for the installed
# CUDA's major version (the fake nvcc is CUDA 12.8), not apt's candidate (the newest CUDA's).
detect FAKE_APT_NCCL=yes FAKE_APT_MADISON=yes
check "nccl_package_for_the_cuda_installed" 3 '^would install: libnccl-dev=2\.28\.3-1\+cuda12\.9 libnccl2=2\.28\.3-1\+cuda12\.9$'
# ... with builds for a newer CUDA only (CUDA 13's, as NVIDIA's Debian 12 repository may have, and the fake
# nvcc is 12.8): apt's candidate, with a warning that it needs a driver of its own CUDA; none where the
# builds are for an older CUDA than the toolkit's, which its driver runs.
detect FAKE_APT_NCCL=yes FAKE_APT_MADISON=cuda13
check "nccl_package_for_a_newer_cuda_warns" 3 'warning: apt offers libnccl-dev built for other CUDA versions only \(newest: 2\.28\.3-1\+cuda13\.0\), none for the installed CUDA 12; NCCL for CUDA 13 needs a driver for CUDA 13'
detect FAKE_APT_NCCL=yes FAKE_APT_MADISON=cuda13 FAKE_CUDA_VERSION=14.0
check "nccl_package_for_an_older_cuda" 3 '^would install: libnccl-dev$' 'warning'
# ... and where libnccl2 is installed (held) at a version apt offers, the headers of that version alone.
detect FAKE_APT_NCCL=yes FAKE_APT_MADISON=yes FAKE_LIBNCCL2=2.27.7-1+cuda12.9
check "nccl_package_for_the_libnccl2_installed" 3 '^would install: libnccl-dev=2\.27\.7-1\+cuda12\.9$'
# ... held at a version apt offers no headers of: exit 3, naming it, rather than an install apt refuses.
detect FAKE_APT_NCCL=yes FAKE_APT_MADISON=yes FAKE_LIBNCCL2=2.19.3-1+cuda12.2
check "nccl_package_for_a_held_libnccl2_not_offered" 3 'libnccl2 2\.19\.3-1\+cuda12\.2 is installed and held'

detect FAKE_APT_NCCL=no
check "nccl_absent_no_package" 3 'libnccl-dev.*NCCL_ROOT'
[ "$(grep -c . <<<"$out")" -eq 1 ] || { echo "FAIL nccl_absent_no_package: more than one line"; failures=$((failures + 1)); }
# Ubuntu 22.04's multiverse has libnccl-dev 2.11: older than the floor, so not installed.
detect FAKE_APT_NCCL=old
check "nccl_package_too_old" 3 'libnccl-dev.*2\.11\.4.*2\.14.*NCCL_ROOT'
detect FAKE_APT_NCCL=epoch
check "nccl_package_with_epoch" 3 '^would install: libnccl-dev$'
detect FAKE_APT_NCCL=none
check "nccl_absent_package_not_installable" 3 'libnccl-dev.*NCCL_ROOT'
rm "$bin/apt-cache"
detect
check "nccl_absent_no_apt_cache" 3 'libnccl-dev.*NCCL_ROOT'
fake apt-cache "$apt_cache"

# (c) CMake older than cmake_minimum_required: exit 3 naming both versions and where to get one.
nccl_header "$sys" 2.28.3
detect FAKE_CMAKE_VERSION=3.22.1
check "cmake_too_old" 3 '3\.22\.1.*3\.24.*pipx install cmake'
detect FAKE_CMAKE_VERSION=3.24.0
check "cmake_at_floor" 0 '^nothing to install$'
# No CMake, and the one apt offers is older than the floor (Ubuntu 22.04's 3.22): refused before anything
# is installed, instead of installing it and then refusing it.
mv "$bin/cmake" "$tmp/cmake.hidden"
detect FAKE_APT_CMAKE=3.22.1-1ubuntu1.22.04.2
check "cmake_candidate_too_old" 3 'apt offers here is 3\.22\.1, older than the CMake 3\.24.*pipx install cmake' 'would install'
detect FAKE_APT_CMAKE=3.28.3-1build7
check "cmake_candidate_new_enough" 3 '^would install: cmake$'
mv "$tmp/cmake.hidden" "$bin/cmake"
# A CMake from pip or snap brings no make, which the presets' generator needs: installed like the rest.
mv "$bin/make" "$tmp/make.hidden"
detect
check "make_missing" 3 '^would install: make$'
mv "$tmp/make.hidden" "$bin/make"
# In a current folder that was deleted, where the real cmake --version fails: said as such, not as an old CMake.
mkdir "$tmp/gone"
out="$(cd "$tmp/gone" && rmdir "$tmp/gone" && env -u NCCL_ROOT -u NCCL_HOME -u CUDACXX -u CUDAToolkit_ROOT PATH="$fake_path" \
           FWI_INSTALL_DRY_RUN=1 FWI_NCCL_SEARCH_DIRS="$sys" FWI_INCLUDE_DIRS="$sys" \
           "$BASH" -c 'set -euo pipefail; source "$1"; install_missing_packages' bash "$common" 2>&1)"
code=$?
check "cwd_deleted" 3 'current folder no longer exists' 'pipx install cmake'

# (d) everything present: nothing to install, and without the dry run nothing said and apt never run.
detect
check "everything_present" 0 '^nothing to install$'
# A dry-run value other than 0 or 1 is refused before anything is planned, not read as "install".
detect FWI_INSTALL_DRY_RUN=true
check "dry_run_value_refused" 2 "^error: FWI_INSTALL_DRY_RUN: 'true' is not 1" 'installing'
out="$(env -u NCCL_ROOT -u NCCL_HOME -u CUDACXX -u CUDAToolkit_ROOT -u FWI_INSTALL_DRY_RUN PATH="$fake_path" FWI_NCCL_SEARCH_DIRS="$sys" FWI_INCLUDE_DIRS="$sys" \
           "$BASH" -c 'set -euo pipefail; source "$1"; install_missing_packages; echo done' bash "$common" 2>&1)"
code=$?
check "everything_present_real_run" 0 '^done$' 'install'

# Each tool or header missing alone is planned as its own package, and only that one.
for missing in cmake:cmake g++:g++ mpicxx:libopenmpi-dev mpirun:openmpi-bin; do
    tool="${missing%%:*}"
    mv "$bin/$tool" "$tmp/tool.hidden"
    detect
    check "missing_$tool" 3 "^would install: $(sed 's/[+.]/\\&/g' <<<"${missing#*:}")\$"
    mv "$tmp/tool.hidden" "$bin/$tool"
done
# doctest and Google Benchmark: needed by the scripts that run the tests and benchmarks; the main job goes on
# without them (CMake leaves the tests and benchmarks out), so a user who cannot install them can run it.
for missing in doctest/doctest.h:doctest-dev:tests benchmark/benchmark.h:libbenchmark-dev:benchmarks; do
    IFS=: read -r header package part <<<"$missing"
    mv "$sys/$header" "$tmp/header.hidden"
    detect FWI_NEEDS_TEST_TOOLS=1
    check "missing_${header%%/*}" 3 "^would install: $package\$"
    detect
    check "missing_${header%%/*}_optional_for_the_main_job" 0 "^\(optional: without them the $part are left out\)\$"
    mv "$tmp/header.hidden" "$sys/$header"
done

# mpi_launcher: Open MPI's mpirun gets the suite's flags (and --allow-run-as-root as root); another MPI's, none.
launcher() {
    out="$(env PATH="$fake_path" "$BASH" -c 'set -euo pipefail; source "$1"; mpi_launcher' bash "$common" 2>&1 | tr '\n' ' ')"
    code=$?
}
launcher
as_root=""
[ "$(id -u)" -ne 0 ] || as_root=" --allow-run-as-root"
check "mpi_launcher_open_mpi" 0 "^mpirun --oversubscribe --bind-to none -x NCCL_NVLS_ENABLE=0$as_root \$"
fake mpirun 'echo "HYDRA build details:"; echo "    Version:                                 4.1"'
launcher
check "mpi_launcher_other_mpi" 0 '^mpirun $'
fake mpirun 'echo "mpirun (Open MPI) 4.1.6"'

# run_tests ARG...: scripts/run-tests.sh in a dry run with the fake tools; sets out and code, and calls to
# what cmake and ctest were asked to do.
run_tests() {
    rm -f "$FAKE_CALLS"
    out="$(env -u NCCL_ROOT -u NCCL_HOME -u CUDA_PATH -u CUDA_HOME -u CUDAToolkit_ROOT -u CUDACXX -u CUDAARCHS \
               -u CMAKE_PREFIX_PATH PATH="$fake_path" FWI_INSTALL_DRY_RUN=1 FWI_NCCL_SEARCH_DIRS="$sys" \
               FWI_INCLUDE_DIRS="$sys" "$BASH" "$repo/scripts/run-tests.sh" "$@" 2>&1)"
    code=$?
    calls="$(paste -sd'|' "$FAKE_CALLS" 2>/dev/null)"
}
# run-tests.sh passes what ctest takes on to it, after the build; refuses anything else before it.
run_tests -L cpu -LE mpi -j2 --timeout 60 --repeat until-pass:2 -R 'a b' --output-on-failure
check "run_tests_passes_ctest_flags" 0 '^nothing to install$'
[ "$calls" = "cmake --preset default|cmake --build --preset default -j $(nproc)|ctest --preset default -L cpu -LE mpi -j2 --timeout 60 --repeat until-pass:2 -R a b --output-on-failure" ] ||
    { echo "FAIL run_tests_passes_ctest_flags: calls: $calls"; failures=$((failures + 1)); }
run_tests
check "run_tests_without_arguments" 0 '^nothing to install$'
[ "$calls" = "cmake --preset default|cmake --build --preset default -j $(nproc)|ctest --preset default" ] ||
    { echo "FAIL run_tests_without_arguments: calls: $calls"; failures=$((failures + 1)); }
run_tests -L cpu --bogus
check "run_tests_unknown_flag" 2 "unknown flag '--bogus'"
[ -z "$calls" ] || { echo "FAIL run_tests_unknown_flag: ran $calls"; failures=$((failures + 1)); }

# (e) nvcc older than CUDA 12.4: exit 3 naming both versions.
detect FAKE_CUDA_VERSION=12.0
check "cuda_too_old" 3 'CUDA 12\.0.*CUDA 12\.4'
detect FAKE_CUDA_VERSION=12.4
check "cuda_at_floor" 0 '^nothing to install$'
detect FAKE_CUDA_VERSION=13.0
check "cuda_newer_major" 0 '^nothing to install$'
# An old nvcc on PATH (Ubuntu's nvidia-cuda-toolkit in /usr/bin) and NVIDIA's newer toolkit in the usual
# place: the scripts take the newer one and say so; where the usual place's is old too, exit 3 as before.
mkdir -p "$tmp/cuda-usual-12.8" "$tmp/cuda-usual-11.5"
printf '#!/bin/sh\necho "Cuda compilation tools, release 12.8, V12.8.93"\n' >"$tmp/cuda-usual-12.8/nvcc"
printf '#!/bin/sh\necho "Cuda compilation tools, release 11.5, V11.5.119"\n' >"$tmp/cuda-usual-11.5/nvcc"
chmod +x "$tmp/cuda-usual-12.8/nvcc" "$tmp/cuda-usual-11.5/nvcc"
detect FAKE_CUDA_VERSION=12.0 FWI_CUDA_BIN="$tmp/cuda-usual-12.8"
check "cuda_old_on_path_newer_in_usual_place" 0 'note: the nvcc on PATH .* is CUDA 12\.0, older than CUDA 12\.4: using CUDA 12\.8 from'
check "cuda_old_on_path_newer_in_usual_place_plan" 0 '^nothing to install$'
detect FAKE_CUDA_VERSION=12.0 FWI_CUDA_BIN="$tmp/cuda-usual-11.5"
check "cuda_old_on_path_and_in_usual_place" 3 'CUDA 12\.0.*CUDA 12\.4' 'note:'
detect FAKE_CUDA_VERSION=12.0 FWI_CUDA_BIN="$tmp/cuda-usual-12.8" CUDACXX=nvcc
check "cuda_old_chosen_by_CUDACXX_stays" 3 'CUDA 12\.0.*CUDA 12\.4' 'note:'
# No nvcc at all: exit 3 before anything is planned (apt cannot install CUDA), even with packages missing.
mv "$bin/nvcc" "$tmp/nvcc.hidden"
rm "$bin/mpirun"
detect FWI_CUDA_BIN="$tmp/no-cuda"
check "cuda_toolkit_missing" 3 'CUDA toolkit \(nvcc\) is not' 'would install'
mv "$tmp/nvcc.hidden" "$bin/nvcc"
ln -s "$bin/mpicxx" "$bin/mpirun"
# CMake takes CUDACXX before the nvcc on PATH, and so do the scripts.
mkdir -p "$tmp/cuda-12.8/bin"
printf '#!/bin/sh\necho "Cuda compilation tools, release 12.8, V12.8.93"\n' >"$tmp/cuda-12.8/bin/nvcc"
chmod +x "$tmp/cuda-12.8/bin/nvcc"
detect FAKE_CUDA_VERSION=12.0 CUDACXX="$tmp/cuda-12.8/bin/nvcc"
check "cuda_from_CUDACXX" 0 '^nothing to install$'
# CMake takes CUDACXX's first word as the compiler, the rest as flags, and a name without / from PATH.
detect FAKE_CUDA_VERSION=12.0 CUDACXX="$tmp/cuda-12.8/bin/nvcc -ccbin g++"
check "cuda_from_CUDACXX_with_flags" 0 '^nothing to install$'
ln -s "$tmp/cuda-12.8/bin/nvcc" "$bin/nvcc-12.8"
detect FAKE_CUDA_VERSION=12.0 CUDACXX="nvcc-12.8"
check "cuda_from_CUDACXX_on_PATH" 0 '^nothing to install$'
rm "$bin/nvcc-12.8"

# Where CMake's FindNCCL looks besides the system folders: NCCL_ROOT, NCCL_HOME, the CUDA toolkit's include.
rm "$sys/nccl.h"
nccl_header "$tmp/opt/nccl/include" 2.21.5
detect NCCL_ROOT="$tmp/opt/nccl"
check "nccl_in_NCCL_ROOT" 0 '^nothing to install$'
detect NCCL_HOME="$tmp/opt/nccl"
check "nccl_in_NCCL_HOME" 0 '^nothing to install$'
nccl_header "$tmp/include" 2.28.3
detect
check "nccl_in_cuda_toolkit" 0 '^nothing to install$'
rm "$tmp/include/nccl.h"
# An NCCL older than find_package(NCCL 2.14): exit 3 naming both versions.
nccl_header "$sys" 2.12.12
detect
check "nccl_too_old" 3 'NCCL 2\.12\.12.*NCCL 2\.14'

# Several things missing at once: all in one plan.
rm "$sys/nccl.h" "$sys/doctest/doctest.h" "$bin/mpirun"
detect FAKE_APT_NCCL=yes
check "several_missing" 3 '^would install: openmpi-bin doctest-dev libnccl-dev$'
# run-tests.sh in a dry run with something missing stops at the plan: no configure, build or test (it
# went on into the build, which then failed for the tool missing).
FAKE_APT_NCCL=yes run_tests
check "run_tests_dry_run_stops" 3 '^would install: openmpi-bin doctest-dev libnccl-dev$'
[ -z "$calls" ] || { echo "FAIL run_tests_dry_run_stops: ran $calls"; failures=$((failures + 1)); }

# Without the dry run, a fresh machine: apt-get update before concluding that no package has NCCL.
# Nothing was installed above (every case was a dry run, or had nothing missing).
[ ! -e "$tmp/apt-get.log" ] || { echo "FAIL: apt-get was run in a dry run: $(cat "$tmp/apt-get.log")"; failures=$((failures + 1)); }
real_run() {
    out="$(env -u NCCL_ROOT -u NCCL_HOME -u CUDACXX -u CUDAToolkit_ROOT -u FWI_INSTALL_DRY_RUN -u FWI_NEEDS_TEST_TOOLS \
               PATH="$fake_path" FWI_CUDA_BIN="$tmp/no-cuda" FWI_APT_LOCK_RETRY_S=0 FWI_NCCL_SEARCH_DIRS="$sys" \
               FWI_INCLUDE_DIRS="$sys" "$@" "$BASH" -c 'set -euo pipefail; source "$1"; install_missing_packages' bash "$common" 2>&1)"
    code=$?
}
touch "$sys/doctest/doctest.h"
ln -s "$bin/mpicxx" "$bin/mpirun"
real_run FAKE_APT_UPDATE_ADDS_NCCL=yes
check "fresh_lists_real_run" 3 "could not install libnccl-dev;"
[ "$(cat "$tmp/apt-get.log" 2>/dev/null | cut -d' ' -f1 | paste -sd' ')" = "update update install" ] ||
    { echo "FAIL fresh_lists_real_run: apt-get calls: $(paste -sd'|' "$tmp/apt-get.log")"; failures=$((failures + 1)); }
# apt-get through sudo only when not root (a container's root often has no sudo at all).
if [ "$(id -u)" -eq 0 ]; then expected_sudo=""; else expected_sudo="sudo sudo sudo"; fi
[ "$(paste -sd' ' "$FAKE_SUDO_LOG" 2>/dev/null)" = "$expected_sudo" ] ||
    { echo "FAIL fresh_lists_real_run: sudo used $(grep -c . "$FAKE_SUDO_LOG" 2>/dev/null || echo 0) time(s) as user $(id -u)"; failures=$((failures + 1)); }
# Another apt holds the package lists' lock (apt-daily on a freshly booted machine): the update is run
# again until it is free, not read as a failed fetch (then "no package provides libnccl-dev").
rm -f "$tmp/apt-get.log" "$FAKE_APT_LISTED"
echo 2 >"$tmp/lock-left"
real_run FAKE_APT_UPDATE_ADDS_NCCL=yes
check "lists_locked_real_run" 3 "could not install libnccl-dev;"
check "lists_locked_real_run_says_it_waits" 3 "another apt holds the package lists: waiting for it"
[ "$(cut -d' ' -f1 "$tmp/apt-get.log" 2>/dev/null | paste -sd' ')" = "update update update update install" ] ||
    { echo "FAIL lists_locked_real_run: apt-get calls: $(paste -sd'|' "$tmp/apt-get.log")"; failures=$((failures + 1)); }
rm -f "$tmp/apt-get.log" "$FAKE_APT_LISTED" "$FAKE_SUDO_LOG"
real_run
check "no_package_after_update_real_run" 3 'no package here provides libnccl-dev.*NCCL_ROOT' 'installing'
[ "$(cat "$tmp/apt-get.log" 2>/dev/null)" = "update -qq" ] ||
    { echo "FAIL no_package_after_update_real_run: apt-get calls: $(paste -sd'|' "$tmp/apt-get.log")"; failures=$((failures + 1)); }
# No CMake and lists never fetched, where the refresh offers one too old (a fresh Ubuntu 22.04 container):
# refused after the refresh, before anything is installed.
rm -f "$tmp/apt-get.log" "$FAKE_APT_LISTED"
mv "$bin/cmake" "$tmp/cmake.hidden"
real_run FAKE_APT_UPDATE_ADDS_CMAKE=3.22.1-1ubuntu1.22.04.2
mv "$tmp/cmake.hidden" "$bin/cmake"
check "cmake_candidate_after_refresh_real_run" 3 'apt offers here is 3\.22\.1, older than the CMake 3\.24' 'installing'
[ "$(cat "$tmp/apt-get.log" 2>/dev/null)" = "update -qq" ] ||
    { echo "FAIL cmake_candidate_after_refresh_real_run: apt-get calls: $(paste -sd'|' "$tmp/apt-get.log")"; failures=$((failures + 1)); }
# Not root, and no sudo (a container's user): exit 3 saying so, before apt-get is run (it would fail on
# "sudo: command not found", read as a package missing). A fake id makes the user someone else.
rm -f "$tmp/apt-get.log" "$FAKE_APT_LISTED"
mv "$bin/sudo" "$tmp/sudo.hidden"
fake id '[ "$1" = -u ] && echo 1000 || exec "'"$(command -v id)"'" "$@"'
real_run FAKE_APT_NCCL=yes
rm "$bin/id"
mv "$tmp/sudo.hidden" "$bin/sudo"
check "not_root_no_sudo_real_run" 3 'missing \(by Debian.s package names\): libnccl-dev; this user is not root and there is no sudo' 'installing'
[ ! -e "$tmp/apt-get.log" ] || { echo "FAIL not_root_no_sudo_real_run: ran apt-get $(paste -sd'|' "$tmp/apt-get.log")"; failures=$((failures + 1)); }
# ... where only doctest and Google Benchmark are missing, the main job goes on without the tests and
# benchmarks, saying so; run-tests.sh (FWI_NEEDS_TEST_TOOLS=1) still stops.
mv "$sys/doctest/doctest.h" "$sys/benchmark/benchmark.h" "$tmp/"
nccl_header "$sys" 2.28.3
mv "$bin/sudo" "$tmp/sudo.hidden"
fake id '[ "$1" = -u ] && echo 1000 || exec "'"$(command -v id)"'" "$@"'
real_run
check "not_root_no_sudo_test_tools_real_run" 0 'not installed: doctest-dev libbenchmark-dev, and this user is not root and has no sudo: the tests and the benchmarks will be left out' 'installing'
real_run FWI_NEEDS_TEST_TOOLS=1
check "not_root_no_sudo_test_tools_run_tests_real_run" 3 'missing \(by Debian.s package names\): doctest-dev libbenchmark-dev; this user is not root' 'installing'
rm "$bin/id"
mv "$tmp/sudo.hidden" "$bin/sudo"
mv "$tmp/doctest.h" "$sys/doctest/"
mv "$tmp/benchmark.h" "$sys/benchmark/"
rm "$sys/nccl.h"
[ ! -e "$tmp/apt-get.log" ] || { echo "FAIL not_root_no_sudo_test_tools_real_run: ran apt-get $(paste -sd'|' "$tmp/apt-get.log")"; failures=$((failures + 1)); }
# apt-get update fails (no network): its own words are shown, not only the missing package they led to.
rm -f "$tmp/apt-get.log" "$FAKE_APT_LISTED"
real_run FAKE_APT_UPDATE_FAILS=yes
check "lists_refresh_fails_real_run" 3 "could not refresh apt's package lists \(apt-get update failed\): Err:1 http://archive"
check "lists_refresh_fails_real_run_names_nccl" 3 'no package here provides libnccl-dev'
rm -f "$tmp/apt-get.log" "$FAKE_APT_LISTED"
real_run FAKE_APT_UPDATE_WARNS=yes
check "lists_refresh_warns_real_run" 3 "warning: apt-get update: W: Failed to fetch https://developer.download.nvidia.com"
# matplotlib is optional: where it cannot be installed (sudo asks a password: the fake sudo cannot run
# "-n true"; as root, the fake apt-get's install fails) the script says so and goes on.
out="$(env PATH="$fake_path" "$BASH" -c 'set -euo pipefail; source "$1"; plan_missing_packages() { echo python3-matplotlib; }
    install_missing_packages; echo "the build would follow"' bash "$common" 2>&1)"
code=$?
check "matplotlib_optional" 0 'warning: .*python3-matplotlib.*the charts and pictures will be left out'
check "matplotlib_optional_goes_on" 0 '^the build would follow$'
out="$(env PATH="$fake_path" FWI_INSTALL_DRY_RUN=1 "$BASH" -c 'set -euo pipefail; source "$1"
    plan_missing_packages() { echo python3-matplotlib; }; install_missing_packages; echo "the build would follow"' \
    bash "$common" 2>&1)"
code=$?
check "matplotlib_optional_dry_run" 0 '^the build would follow$'
out="$(env PATH="$fake_path" FWI_INSTALL_DRY_RUN=1 "$BASH" -c 'set -euo pipefail; source "$1"
    plan_missing_packages() { echo python3 python3-matplotlib; }; install_missing_packages' bash "$common" 2>&1)"
code=$?
check "python3_needed_dry_run" 3 'installs nothing, and the suite needs these'
# Which launcher is Open MPI's, and of which major version: the tests that pass Open MPI's own flags skip
# (77) under another MPI's, as the survivors fault tests do under Open MPI 5, which lacks the setting.
fake mpich-mpiexec 'echo "HYDRA build details:"; echo "    Version:                                 4.1.2"'
fake ompi4-mpirun 'echo "mpirun (Open MPI) 4.1.6"'
fake ompi5-mpirun 'echo "mpirun (Open MPI) 5.0.3"'
majors="$(env PATH="$fake_path" "$BASH" -c 'source "$1"; for l in ompi4-mpirun ompi5-mpirun mpich-mpiexec no-such-launcher; do
    printf "%s=%s " "$l" "$(open_mpi_major "$l")"; done' bash "$common" 2>/dev/null)"
[ "$majors" = "ompi4-mpirun=4 ompi5-mpirun=5 mpich-mpiexec= no-such-launcher= " ] ||
    { echo "FAIL open_mpi_major: $majors"; failures=$((failures + 1)); }
out="$(env PATH="$fake_path" "$BASH" -c 'source "$1"; skip_unless_open_mpi mpich-mpiexec; echo "ran"' bash "$common" 2>&1)"
code=$?
check "skip_unless_open_mpi" 77 "needs Open MPI's mpirun.*mpich-mpiexec is another launcher: skipped" '^ran$'
# A launcher that is not there, or whose --version fails, is a broken MPI: the test fails, it is not skipped.
fake broken-mpirun 'echo "mpirun: error while loading shared libraries: libopen-rte.so.40" >&2; exit 127'
for launcher in no-such-launcher broken-mpirun; do
    out="$(env PATH="$fake_path" "$BASH" -c 'source "$1"; skip_unless_open_mpi "$2"; echo "ran"' bash "$common" \
        "$launcher" 2>&1)"
    code=$?
    check "skip_unless_open_mpi_$launcher" 1 "FAILED: '$launcher --version' does not answer" '^ran$'
done

# Where there is no apt-get (Rocky, RHEL, Fedora), what is missing is named with the other package manager's
# way, before any apt command; matplotlib alone is still only a warning.
no_apt_path="$tmp/no-apt:$tmp/tools"
mkdir -p "$tmp/no-apt"
for tool in "$bin"/*; do
    case "$(basename "$tool")" in apt-get | apt-cache | mpicxx | mpirun) ;; *) ln -s "$tool" "$tmp/no-apt/" ;; esac
done
out="$(env PATH="$no_apt_path" "$BASH" -c 'set -euo pipefail; source "$1"
    plan_missing_packages() { echo libopenmpi-dev openmpi-bin; }; install_missing_packages' bash "$common" 2>&1)"
code=$?
check "no_apt_get" 3 'missing \(by Debian.s package names\): libopenmpi-dev openmpi-bin; there is no apt-get here.*dnf install.*module load' 'command not found'
out="$(env PATH="$no_apt_path" "$BASH" -c 'set -euo pipefail; source "$1"
    plan_missing_packages() { echo python3-matplotlib; }; install_missing_packages; echo "the build would follow"' \
    bash "$common" 2>&1)"
code=$?
check "no_apt_get_matplotlib_optional" 0 'no apt-get here to install them' 'command not found'
check "no_apt_get_matplotlib_goes_on" 0 '^the build would follow$'
mkdir -p "$tmp/no-nccl"
out="$(env -u NCCL_ROOT -u NCCL_HOME -u CUDACXX -u CUDAToolkit_ROOT PATH="$no_apt_path" FWI_NCCL_SEARCH_DIRS="$tmp/no-nccl" \
           FWI_INCLUDE_DIRS="$sys" "$BASH" -c 'set -euo pipefail; source "$1"; install_missing_packages' bash "$common" 2>&1)"
code=$?
check "no_apt_get_no_nccl" 3 'no package here provides libnccl-dev \(there is no apt-get here: .*libnccl-devel\)' 'command not found'
if [ "$failures" -ne 0 ]; then
    echo "$failures check(s) failed"
    exit 1
fi
echo "all checks passed"
