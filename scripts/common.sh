# Sourced by the scripts in this folder: installs what is missing, and configures and builds the suite.
# shellcheck shell=bash

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# NVLink multicast (NVLS) stays off in everything this suite starts.
export NCCL_NVLS_ENABLE=0
# The C locale, for the scripts and what they start: the checks of numbers read [0-9] as the ten digits
# (in other locales a bracket range also takes "²" or "５"), and the tools whose output the scripts read
# (apt-cache policy's "Candidate:", sed's "Broken pipe") answer in English.
export LC_ALL=C

# The first clang-format of major version 14 on PATH (clang-format-14, or a clang-format of that version),
# printed; nothing and status 1 where there is none. The style was laid out by 14: other versions lay some
# constructs out differently.
clang_format_14() {
    local candidate
    for candidate in clang-format-14 clang-format; do
        command -v "$candidate" >/dev/null || continue
        if [[ "$("$candidate" --version)" =~ version\ 14\. ]]; then
            echo "$candidate"
            return 0
        fi
    done
    return 1
}

# print_help SCRIPT: the comment block at the top of SCRIPT (after its #! line) without the leading "# ",
# which is what each script prints for --help: the help and the header cannot drift apart. Where it cannot
# be written (closed, a full disk) it ends the script with exit 3 and a message; a reader that stopped early
# (SIGPIPE, or EPIPE where SIGPIPE is ignored) took what it wanted.
print_help() {
    local written=0 why=""  # (`why` stays unset where fd 1 is closed and the redirection itself fails)
    # sed's own error in `why` (stdout goes through fd 3): "Broken pipe" where SIGPIPE is ignored.
    { why="$(sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$1" 2>&1 >&3 3>&-)"; } 3>&1 || written=$?
    if [ "$written" -eq 0 ] || [ "$written" -eq 141 ] || [[ $why == *"Broken pipe"* ]]; then return 0; fi
    echo "$(basename "$1" .sh): environment: --help: cannot write the help text to standard output" >&2
    exit 3
}

# first_time FLAG: false when this script was already given FLAG (it keeps the flags seen in FLAGS_SEEN).
# The scripts refuse a flag given twice, as the programs do: which of the two values was meant is a guess.
FLAGS_SEEN=" "
first_time() {
    [[ "$FLAGS_SEEN" == *" $1 "* ]] && return 1
    FLAGS_SEEN+="$1 "
}

# is_one_of ITEM CHOICE...: whether ITEM is exactly one of the CHOICEs (an ITEM holding spaces, such as
# "build tests" given as one quoted argument, is none of them).
is_one_of() {
    local item="$1" choice
    shift
    for choice in "$@"; do [ "$item" = "$choice" ] && return 0; done
    return 1
}

# repeated_item LIST: the first item of the comma list LIST that is listed again, or nothing. The scripts
# refuse such a list, as the programs do (`--gpus 1,1`: the second item was probably meant to be another).
repeated_item() {
    local item seen=" "
    for item in ${1//,/ }; do
        [[ "$seen" == *" $item "* ]] && { echo "$item"; return 0; }
        seen+="$item "
    done
}

# Version floors: cmake_minimum_required in CMakeLists.txt, the CUDA the suite is built and tested with,
# and find_package(NCCL 2.14) (ncclCommInitRankConfig, ncclCommFinalize, non-blocking communicators).
FWI_CMAKE_MIN=3.24
FWI_CUDA_MIN=12.4
FWI_NCCL_MIN=2.14

# cmake/FindNCCL.cmake reads NCCL_ROOT; NCCL_HOME (NCCL's own name for it) works the same way.
if [ -z "${NCCL_ROOT:-}" ] && [ -n "${NCCL_HOME:-}" ]; then
    export NCCL_ROOT="$NCCL_HOME"
fi

# Detection: functions that take their inputs from the environment only (PATH, NCCL_ROOT / NCCL_HOME,
# FWI_NCCL_SEARCH_DIRS, FWI_INCLUDE_DIRS), so tests/scripts_detection_test.sh runs them with fake tools.

# version_at_least FOUND NEEDED: true when FOUND >= NEEDED (dotted numbers).
version_at_least() {
    [ -n "$1" ] && printf '%s\n%s\n' "$2" "$1" | sort -V -C
}

# "3.28.3" from `cmake --version`; "12.4" from `nvcc --version` (empty when not found).
cmake_version() { cmake --version 2>/dev/null | sed -n 's/^cmake[^0-9]*\([0-9][0-9.]*\).*/\1/p' | head -n 1 || true; }
# The nvcc CMake will use: CUDACXX's first word (the rest are flags; a name without / is looked up on
# PATH, as check_cuda_environment reads it), else CUDAToolkit_ROOT's, else the first on PATH (empty: none).
nvcc_path() {
    local compiler
    read -r compiler _ <<<"${CUDACXX:-}"
    if [ -n "$compiler" ] && command -v -- "$compiler" 2>/dev/null; then
        return 0
    elif [ -n "${CUDAToolkit_ROOT:-}" ] && [ -x "$CUDAToolkit_ROOT/bin/nvcc" ]; then
        printf '%s\n' "$CUDAToolkit_ROOT/bin/nvcc"
    else
        command -v nvcc 2>/dev/null || true
    fi
}
nvcc_version() { "$(nvcc_path)" --version 2>/dev/null | sed -n 's/.*release \([0-9][0-9.]*\).*/\1/p' | head -n 1 || true; }

# The CUDA toolkit is a prerequisite; put its nvcc on PATH if it is installed in the usual place
# (FWI_CUDA_BIN: another place, which the tests use to stand for a machine without CUDA). Also where the
# nvcc on PATH is older than the floor and that one is not: Ubuntu's own nvidia-cuda-toolkit puts CUDA 12.0
# (11.5 on 22.04) in /usr/bin, beside NVIDIA's newer toolkit in /usr/local/cuda. A compiler the user chose
# (CUDACXX, CUDAToolkit_ROOT) stays.
FWI_CUDA_BIN="${FWI_CUDA_BIN:-/usr/local/cuda/bin}"
put_usual_cuda_on_path() {
    [ -x "$FWI_CUDA_BIN/nvcc" ] || return 0
    if ! command -v nvcc >/dev/null 2>&1; then
        export PATH="$FWI_CUDA_BIN:$PATH"
        return 0
    fi
    [ -z "${CUDACXX:-}" ] && [ -z "${CUDAToolkit_ROOT:-}" ] || return 0
    [ ! "$(command -v nvcc)" -ef "$FWI_CUDA_BIN/nvcc" ] || return 0  # the usual one already
    local on_path usual
    on_path="$(nvcc_version)"
    version_at_least "$on_path" "$FWI_CUDA_MIN" && return 0
    usual="$(PATH="$FWI_CUDA_BIN:$PATH" nvcc_version)"
    version_at_least "$usual" "$FWI_CUDA_MIN" || return 0
    echo "note: the nvcc on PATH ($(command -v nvcc)) is CUDA ${on_path:-of an unknown version}, older than CUDA $FWI_CUDA_MIN: using CUDA $usual from $FWI_CUDA_BIN" >&2
    export PATH="$FWI_CUDA_BIN:$PATH"
}
put_usual_cuda_on_path

# Where CMake's find_path(nccl.h) looks (cmake/FindNCCL.cmake), one folder a line: NCCL_ROOT (and
# NCCL_HOME), the CUDA toolkit of the nvcc CMake uses, then the system folders (CMake looks in NCCL_ROOT
# or NCCL_HOME alone when one is set; a header found here elsewhere then still fails there, with a message). FWI_NCCL_SEARCH_DIRS
# (colon-separated) replaces the system folders, the usual CUDA locations and the PATH-derived ones.
nccl_search_dirs() {
    local root dir nvcc d
    for root in "${NCCL_ROOT:-}" "${NCCL_HOME:-}"; do
        [ -n "$root" ] && printf '%s\n%s\n' "$root/include" "$root"
    done
    nvcc="$(nvcc_path)"
    if [ -n "$nvcc" ]; then
        for dir in "$(dirname "$nvcc")" "$(dirname "$(readlink -f "$nvcc")")"; do
            printf '%s\n' "$dir/../include"
            for d in "$dir"/../targets/*/include; do [ -d "$d" ] && printf '%s\n' "$d"; done
        done
    fi
    if [ -n "${FWI_NCCL_SEARCH_DIRS+set}" ]; then
        tr ':' '\n' <<<"$FWI_NCCL_SEARCH_DIRS"
        return 0
    fi
    for root in "${CUDAToolkit_ROOT:-}" "${CUDA_PATH:-}" "${CUDA_HOME:-}" /usr/local/cuda; do
        [ -n "$root" ] && printf '%s\n' "$root/include"
    done
    # CMake also looks in PREFIX/include for every CMAKE_PREFIX_PATH entry and every PREFIX/bin on PATH.
    local IFS=:
    for root in ${CMAKE_PREFIX_PATH:-}; do [ -n "$root" ] && printf '%s\n' "$root/include"; done
    for dir in $PATH; do
        case "$dir" in */bin | */sbin) printf '%s\n' "${dir%/*}/include" ;; esac
    done
    local arch
    arch="$(gcc -print-multiarch 2>/dev/null || true)"
    printf '%s\n' /usr/local/include /usr/include
    [ -n "$arch" ] && printf '%s\n' "/usr/include/$arch"
    return 0
}

# The folder that holds nccl.h, where CMake would find it (status 1 when none does).
find_nccl_header() {
    local dir
    while IFS= read -r dir; do
        [ -n "$dir" ] && [ -f "$dir/nccl.h" ] && { printf '%s\n' "$dir"; return 0; }
    done < <(nccl_search_dirs)
    return 1
}

# "2.28.3" from the NCCL_MAJOR/MINOR/PATCH defines of DIR/nccl.h.
nccl_header_version() {
    local major minor patch
    major="$(sed -n 's/^#define NCCL_MAJOR \([0-9]*\).*/\1/p' "$1/nccl.h" | head -n 1)"
    minor="$(sed -n 's/^#define NCCL_MINOR \([0-9]*\).*/\1/p' "$1/nccl.h" | head -n 1)"
    patch="$(sed -n 's/^#define NCCL_PATCH \([0-9]*\).*/\1/p' "$1/nccl.h" | head -n 1)"
    if [ -n "$major" ] && [ -n "$minor" ]; then printf '%s.%s.%s\n' "$major" "$minor" "${patch:-0}"; fi
}

# True when FILE (relative, e.g. doctest/doctest.h) is in one of the system include folders
# (FWI_INCLUDE_DIRS, colon-separated, replaces /usr/include:/usr/local/include).
have_header() {
    local dir IFS=:
    for dir in ${FWI_INCLUDE_DIRS-/usr/include:/usr/local/include}; do
        [ -n "$dir" ] && [ -f "$dir/$1" ] && return 0
    done
    return 1
}

# The version apt would install of a package ("2.28.3" of "2.28.3-1+cuda12.8", no epoch), status 1
# when apt offers none (unknown name, or Candidate: (none)).
apt_candidate_version() {
    command -v apt-cache >/dev/null 2>&1 || return 1
    local policy version
    policy="$(apt-cache policy "$1" 2>/dev/null)" || return 1
    version="$(sed -n 's/^[[:space:]]*Candidate:[[:space:]]*\([0-9]*:\)\{0,1\}\([0-9][0-9.]*\).*/\2/p' <<<"$policy" | head -n 1 || true)"
    [ -n "$version" ] && printf '%s\n' "$version"
}

# nccl_packages_for_cuda: the NCCL packages to install where nccl.h is missing. Where libnccl2 is installed
# (NVIDIA's CUDA images hold it at their version) and apt offers libnccl-dev of that version: "libnccl-dev=V",
# so that apt neither changes nor trips over the installed library. Else "libnccl-dev=V libnccl2=V" for the
# newest NCCL that apt offers built for the installed CUDA's major version (NVIDIA's repository builds each
# NCCL for several: "2.28.3-1+cuda13.0", "2.28.3-1+cuda12.9"), as its candidate is the build for the newest
# CUDA, which a driver for an older one may not run. Fails where no version fits (Ubuntu's multiverse: then
# apt's candidate; with a warning where the versions offered are NVIDIA's builds for newer CUDAs only); exits 3
# where libnccl2 is held at a version apt offers no libnccl-dev of (apt would refuse).
nccl_packages_for_cuda() {
    local major name version rest installed offered
    # Lines " libnccl-dev | 2.28.3-1+cuda13.0 | https://... Packages", newest first.
    offered="$(apt-cache madison libnccl-dev 2>/dev/null || true)"
    # "hold ok installed|2.27.7-1+cuda12.9", a line per architecture installed: the first.
    installed="$(dpkg-query -W -f='${Status}|${Version}\n' libnccl2 2>/dev/null | head -n 1 || true)"
    if [[ $installed == *" ok installed|"* ]]; then
        local status="${installed%% *}"
        installed="${installed##*|}"
        while IFS='|' read -r name version rest; do
            version="${version//[[:space:]]/}"
            if [ "$version" = "$installed" ]; then
                echo "libnccl-dev=$version"
                return 0
            fi
        done <<<"$offered"
        if [ "$status" = hold ]; then
            echo "error: libnccl2 $installed is installed and held (apt-mark showhold), and apt offers no libnccl-dev of that version for NCCL's header; install the header of NCCL $installed (https://developer.nvidia.com/nccl) and point the build at it with NCCL_ROOT=/path/to/nccl, or release the hold (apt-mark unhold libnccl2) and run again" >&2
            exit 3
        fi
    fi
    major="$(nvcc_version)"
    major="${major%%.*}"
    [ -n "$major" ] || return 1
    local other=""
    while IFS='|' read -r name version rest; do
        version="${version//[[:space:]]/}"
        if [[ $version == *"+cuda${major}."* ]]; then
            echo "libnccl-dev=$version libnccl2=$version"
            return 0
        fi
        [[ $version == *"+cuda"* && -z $other ]] && other="$version"
    done <<<"$offered"
    # NVIDIA's builds, none for this CUDA: apt's candidate is the newest of them, which needs a driver of its
    # own CUDA; one for a newer CUDA than the toolkit's may not start under the driver the toolkit needs.
    local other_major="${other#*+cuda}"
    other_major="${other_major%%.*}"
    [[ $other_major =~ ^[0-9]+$ ]] && [ "$other_major" -gt "$major" ] &&
        echo "warning: apt offers libnccl-dev built for other CUDA versions only (newest: $other), none for the installed CUDA $major; NCCL for CUDA $other_major needs a driver for CUDA $other_major, and under an older one it will not start: then install NCCL for CUDA $major from https://developer.nvidia.com/nccl and point the build at it with NCCL_ROOT=/path/to/nccl" >&2
    return 1
}

# Whether FWI_INSTALL_DRY_RUN asks for a dry run of install_missing_packages: 1 yes, unset, empty or 0 no;
# any other value is refused (exit 2), since a "true" read as "no" would install for real.
install_dry_run() {
    case "${FWI_INSTALL_DRY_RUN:-0}" in
        1) return 0 ;;
        0) return 1 ;;
        *) echo "error: FWI_INSTALL_DRY_RUN: '$FWI_INSTALL_DRY_RUN' is not 1 (only print the plan) or 0 (install)" >&2
           exit 2 ;;
    esac
}

# gpu_device_nodes_present: whether the GPUs' device nodes are there (nvidia0, ...; dxg under WSL) in
# FWI_DEV_DIR (/dev; another folder in the tests): where nvidia-smi is not installed (a container without
# NVIDIA's utility capability), CUDA may still see GPUs there, and nowhere else.
gpu_device_nodes_present() {
    local dev="${FWI_DEV_DIR:-/dev}"
    compgen -G "$dev/nvidia[0-9]*" >/dev/null || [ -e "$dev/dxg" ]
}

# apt_get_update SUDO [quiet]: apt-get update -qq; its error output in apt_update_errors, and on stderr unless
# quiet (the caller shows it). Another apt holding the package lists' lock (apt-daily or cloud-init on a
# freshly booted machine) fails it at once (DPkg::Lock::Timeout waits only for dpkg's lock, in the installs):
# it is tried 30 times, FWI_APT_LOCK_RETRY_S seconds apart (10: 5 minutes), saying so on stderr.
apt_update_errors=""
apt_get_update() {
    local sudo="$1" quiet="${2:-}" status attempt
    for ((attempt = 1; ; attempt++)); do
        status=0
        apt_update_errors="$($sudo apt-get update -qq 2>&1 >/dev/null)" || status=$?
        if [ "$status" -eq 0 ] || [ "$attempt" -ge 30 ] ||
            ! grep -qE 'Could not get lock|Unable to lock' <<<"$apt_update_errors"; then
            break
        fi
        [ "$attempt" -gt 1 ] || echo "another apt holds the package lists: waiting for it (at most 30 tries)" >&2
        sleep "${FWI_APT_LOCK_RETRY_S:-10}"
    done
    [ -n "$quiet" ] || [ -z "$apt_update_errors" ] || printf '%s\n' "$apt_update_errors" >&2
    return "$status"
}

# A fresh machine may never have run apt-get update (or has just been given NVIDIA's repository): refresh
# the package lists once before concluding that no package provides WHAT. Not in a dry run. Says on stderr
# what it does (sudo may ask for a password) and apt-get's first error or warning: without it a later
# "no package provides" would hide the cause (no network, no sudo).
refresh_apt_lists() {
    local what="$1" sudo="" why
    ! install_dry_run && command -v apt-get >/dev/null 2>&1 || return 1
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    if [ -n "$sudo" ] && ! command -v sudo >/dev/null 2>&1; then
        echo "warning: could not refresh apt's package lists to look for $what: this user is not root, and there is no sudo" >&2
        return 1
    fi
    echo "refreshing apt's package lists to look for $what${sudo:+ (with sudo)}" >&2
    local status=0 first
    apt_get_update "$sudo" quiet || status=$?
    why="$apt_update_errors"
    # The first error or warning says why (a failed fetch), not apt's closing summary; apt-get may report a
    # failed fetch as a warning and exit 0.
    first="$(grep -m 1 -E '^(E|W|Err):|Failed to fetch' <<<"$why")"
    why="${why%$'\n'}"
    if [ "$status" -ne 0 ]; then
        echo "warning: could not refresh apt's package lists (apt-get update failed): ${first:-${why##*$'\n'}}" >&2
        return 1
    fi
    [ -z "$first" ] || echo "warning: apt-get update: $first" >&2
}

# Version floors of what is installed (a missing tool is left to the install, but for CUDA, which the
# install cannot provide): exit 3 with one message naming the version found and the one needed.
check_cmake_version() {
    command -v cmake >/dev/null 2>&1 || return 0
    # In a current folder that was deleted, `cmake --version` fails ("Current working directory cannot be
    # established"), which would read as a CMake too old: said as what it is.
    if ! pwd -P >/dev/null 2>&1; then
        echo "error: the current folder no longer exists (deleted or moved while this shell was in it), where CMake cannot run; cd to an existing folder and run again" >&2
        exit 3
    fi
    local found
    found="$(cmake_version)"
    if ! version_at_least "$found" "$FWI_CMAKE_MIN"; then
        echo "error: CMake ${found:-(unknown version)} is installed ($(command -v cmake)) but the suite needs CMake $FWI_CMAKE_MIN or newer; $FWI_NEWER_CMAKE" >&2
        exit 3
    fi
}

# Where a newer CMake comes from, when the distribution's is too old (Ubuntu 22.04 has 3.22). A bare pip
# install is refused on Debian 12 and Ubuntu 23.04 on (PEP 668), and a fresh Ubuntu has no pip.
FWI_NEWER_CMAKE="get a newer one from Kitware's apt repository (https://apt.kitware.com), the release tarball (https://cmake.org/download) or 'pipx install cmake' (then put ~/.local/bin first on PATH), and run again"

# Refuses (exit 3) before anything is installed when CMake is missing and apt would install one older than
# the floor: the install would end in check_cmake_version's refusal anyway. Where apt offers none yet (lists
# never fetched, as in a fresh container of Ubuntu 22.04), the lists are refreshed first to know which.
check_cmake_candidate() {
    command -v cmake >/dev/null 2>&1 && return 0
    local offered
    offered="$(apt_candidate_version cmake)" || { refresh_apt_lists cmake && offered="$(apt_candidate_version cmake)"; } ||
        return 0
    version_at_least "$offered" "$FWI_CMAKE_MIN" && return 0
    echo "error: CMake is not installed, and the one apt offers here is $offered, older than the CMake $FWI_CMAKE_MIN the suite needs; $FWI_NEWER_CMAKE" >&2
    exit 3
}

# Exits 3 when no nvcc is found (apt cannot install CUDA for us) or it is older than the floor.
check_nvcc_version() {
    local nvcc found
    nvcc="$(nvcc_path)"
    if [ -z "$nvcc" ]; then
        echo "error: the CUDA toolkit (nvcc) is not installed (not on PATH, not in $FWI_CUDA_BIN, no CUDACXX or CUDAToolkit_ROOT); install CUDA $FWI_CUDA_MIN or newer (https://developer.nvidia.com/cuda-downloads), put its bin on PATH and run again" >&2
        exit 3
    fi
    found="$(nvcc_version)"
    if ! version_at_least "$found" "$FWI_CUDA_MIN"; then
        echo "error: the CUDA toolkit found is CUDA ${found:-(unknown version)} ($nvcc) but the suite needs CUDA $FWI_CUDA_MIN or newer; install a newer CUDA toolkit (https://developer.nvidia.com/cuda-downloads) and put its bin first on PATH (e.g. PATH=/usr/local/cuda-13.0/bin:\$PATH), and run again" >&2
        exit 3
    fi
}

# The Debian/Ubuntu packages to install, one line, space-separated (empty: nothing is missing). Exits 3,
# with one message, on what a package cannot fix: no CUDA toolkit, a CMake or CUDA older than the floor,
# an NCCL older than the floor, or no NCCL anywhere and no package that provides it.
plan_missing_packages() {
    local missing=()
    check_cmake_version
    check_cmake_candidate
    check_nvcc_version
    command -v cmake >/dev/null 2>&1 || missing+=(cmake)
    command -v g++ >/dev/null 2>&1 || missing+=(g++)
    command -v make >/dev/null 2>&1 || missing+=(make)  # the presets' generator: Unix Makefiles
    command -v mpicxx >/dev/null 2>&1 || missing+=(libopenmpi-dev)
    command -v mpirun >/dev/null 2>&1 || missing+=(openmpi-bin)
    have_header doctest/doctest.h || missing+=(doctest-dev)
    have_header benchmark/benchmark.h || missing+=(libbenchmark-dev)
    local nccl_dir nccl_found
    if nccl_dir="$(find_nccl_header)"; then
        nccl_found="$(nccl_header_version "$nccl_dir" || true)"
        if [ -n "$nccl_found" ] && ! version_at_least "$nccl_found" "$FWI_NCCL_MIN"; then
            echo "error: NCCL $nccl_found is installed ($nccl_dir/nccl.h) but the suite needs NCCL $FWI_NCCL_MIN or newer; install a newer libnccl-dev (from NVIDIA's CUDA apt repository) or NCCL from https://developer.nvidia.com/nccl, point the build at it with NCCL_ROOT=/path/to/nccl (or NCCL_HOME), and run again" >&2
            exit 3
        fi
    elif nccl_found="$(apt_candidate_version libnccl-dev)" ||
         { refresh_apt_lists libnccl-dev && nccl_found="$(apt_candidate_version libnccl-dev)"; }; then
        local nccl_packages picked=0
        nccl_packages="$(nccl_packages_for_cuda)" || picked=$?
        [ "$picked" -ne 3 ] || exit 3  # it said why
        if [ "$picked" -eq 0 ]; then
            nccl_found="${nccl_packages#libnccl-dev=}"
            nccl_found="${nccl_found%%-*}"
        else
            nccl_packages=""
        fi
        if ! version_at_least "$nccl_found" "$FWI_NCCL_MIN"; then
            echo "error: NCCL (nccl.h) is not installed and the libnccl-dev apt offers here is $nccl_found, older than the NCCL $FWI_NCCL_MIN the suite needs; install libnccl-dev from NVIDIA's CUDA apt repository (https://developer.nvidia.com/cuda-downloads) or NCCL from https://developer.nvidia.com/nccl, and for NCCL in another folder point the build at it: NCCL_ROOT=/path/to/nccl scripts/run-tests.sh (or NCCL_HOME=...)" >&2
            exit 3
        fi
        read -r -a nccl_packages <<<"${nccl_packages:-libnccl-dev}"
        missing+=("${nccl_packages[@]}")
    else
        local lists=""
        install_dry_run && lists=" (a dry run does not refresh apt's package lists: a real run runs apt-get update first)"
        command -v apt-get >/dev/null 2>&1 || lists=" (there is no apt-get here: on Rocky, RHEL or Fedora, NVIDIA's CUDA repository for dnf has libnccl-devel)"
        echo "error: NCCL (nccl.h) is not installed and no package here provides libnccl-dev$lists; install libnccl-dev from NVIDIA's CUDA apt repository (https://developer.nvidia.com/cuda-downloads, or Ubuntu's multiverse) or NCCL from https://developer.nvidia.com/nccl, and for NCCL in another folder point the build at it: NCCL_ROOT=/path/to/nccl scripts/run-tests.sh (or NCCL_HOME=...)" >&2
        exit 3
    fi
    # The scripts' Python helpers need a python3; the comparison's chart and 06's pictures need matplotlib
    # too (either python3 may have it), which install_missing_packages treats as optional.
    if ! command -v python3 >/dev/null 2>&1 && [ ! -x /usr/bin/python3 ]; then
        missing+=(python3 python3-matplotlib)
    elif ! python3 -c 'import matplotlib' >/dev/null 2>&1 && ! /usr/bin/python3 -c 'import matplotlib' >/dev/null 2>&1; then
        missing+=(python3-matplotlib)
    fi
    echo "${missing[*]}"
}

# What the suite leaves out without PACKAGE, where it can go without it (nothing: it needs it). matplotlib
# draws the charts and pictures. doctest and Google Benchmark build the tests and the benchmarks, which the
# main job neither builds nor runs without them (CMakeLists.txt leaves them out); the scripts that run them
# set FWI_NEEDS_TEST_TOOLS=1, and then need them.
left_out_without() {
    case "$1" in
        python3-matplotlib) echo "the charts and pictures" ;;
        doctest-dev) [ "${FWI_NEEDS_TEST_TOOLS:-0}" = 1 ] || echo "the tests" ;;
        libbenchmark-dev) [ "${FWI_NEEDS_TEST_TOOLS:-0}" = 1 ] || echo "the benchmarks" ;;
    esac
}

# Installs the Debian/Ubuntu packages that are missing, and only those, so it also runs where nothing
# can be installed as long as everything is already there. FWI_INSTALL_DRY_RUN=1 prints the plan
# without running apt: "nothing to install" (and returns), or "would install: ..." and exit 3, since the
# build would only fail later without them (cmake: command not found). The optional packages
# (left_out_without) are installed only where that needs no password (root, or sudo that asks none, as
# after the other packages' install); where they cannot be, or their install fails, that is a warning
# naming what is left out, and a dry run that would install only them goes on.
install_missing_packages() {
    local plan dry_run=0
    install_dry_run && dry_run=1
    plan="$(plan_missing_packages)" || exit $?
    local missing=() needed=() optional=() parts=() package part left_out="" i
    read -r -a missing <<<"$plan"
    for package in "${missing[@]}"; do
        part="$(left_out_without "$package")"
        if [ -z "$part" ]; then
            needed+=("$package")
        else
            optional+=("$package")
            parts+=("$part")
        fi
    done
    for ((i = 0; i < ${#parts[@]}; i++)); do  # "a", "a and b", "a, b and c"
        if ((i == 0)); then
            left_out="${parts[i]}"
        elif ((i == ${#parts[@]} - 1)); then
            left_out+=" and ${parts[i]}"
        else
            left_out+=", ${parts[i]}"
        fi
    done
    if [ ${#needed[@]} -gt 0 ] && ! command -v apt-get >/dev/null 2>&1; then
        echo "error: missing (by Debian's package names): ${needed[*]}; there is no apt-get here to install them: install them with this system's package manager and run again (Rocky, RHEL, Fedora: dnf install cmake gcc-c++ make openmpi-devel python3-matplotlib, doctest-devel and google-benchmark-devel from EPEL, then \`module load mpi/openmpi-$(uname -m)\` to put mpicxx and mpirun on PATH)" >&2
        exit 3
    fi
    if [ "$dry_run" = 1 ]; then
        if [ ${#missing[@]} -eq 0 ]; then echo "nothing to install"; return 0; fi
        echo "would install: ${missing[*]}"
        [ ${#needed[@]} -gt 0 ] || { echo "(optional: without them $left_out are left out)"; return 0; }
        echo "error: a dry run (FWI_INSTALL_DRY_RUN=1) installs nothing, and the suite needs these; stopping" >&2
        exit 3
    fi
    local sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    local no_sudo=""
    [ -n "$sudo" ] && ! command -v sudo >/dev/null 2>&1 && no_sudo=yes
    if [ ${#needed[@]} -gt 0 ] && [ -n "$no_sudo" ]; then
        echo "error: missing (by Debian's package names): ${needed[*]}; this user is not root and there is no sudo to install them: have an administrator install them (apt-get install ${needed[*]}) and run again" >&2
        exit 3
    fi
    if [ ${#needed[@]} -gt 0 ]; then
        echo "installing missing packages: ${needed[*]}"
        # env: sudo's env_reset would drop a DEBIAN_FRONTEND set before it, and a debconf or needrestart
        # dialog would then wait for an answer.
        # A dpkg lock held by another install (unattended-upgrades on a freshly booted machine) is waited for,
        # for at most 5 minutes, rather than failing at once.
        if ! { apt_get_update "$sudo" &&
               $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -o DPkg::Lock::Timeout=300 -y -qq "${needed[@]}"; }; then
            echo "error: could not install ${needed[*]}; install them and run again" >&2
            exit 3
        fi
    fi
    if [ ${#optional[@]} -gt 0 ]; then
        if ! command -v apt-get >/dev/null 2>&1; then
            echo "warning: not installed: ${optional[*]} (no apt-get here to install them): $left_out will be left out until they are installed (Rocky, RHEL, Fedora: python3-matplotlib, doctest-devel, google-benchmark-devel)" >&2
        elif [ -n "$no_sudo" ]; then
            echo "warning: not installed: ${optional[*]}, and this user is not root and has no sudo: $left_out will be left out until they are installed" >&2
        elif [ -n "$sudo" ] && ! sudo -n true >/dev/null 2>&1; then
            echo "warning: not installed: ${optional[*]}, and sudo would ask for a password: $left_out will be left out until they are installed (sudo apt-get install ${optional[*]})" >&2
        else
            echo "installing missing packages: ${optional[*]}"
            # The lists were refreshed above where something else was installed.
            { [ ${#needed[@]} -gt 0 ] || apt_get_update "$sudo"; } &&
                $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -o DPkg::Lock::Timeout=300 -y -qq "${optional[@]}" ||
                echo "warning: could not install ${optional[*]}: $left_out will be left out until they are installed" >&2
        fi
    fi
    # The distribution's CMake may be older than the floor (Ubuntu 22.04 has 3.22).
    hash -r
    check_cmake_version
}

# python3_path: the python3 the scripts run their Python helpers with (compare.py, relative_paths.py): the
# one on PATH, else the system's /usr/bin/python3 (to which the install step gives matplotlib); nothing when
# there is neither that runs, which the scripts check before their runs rather than fail on it at the end.
# "Runs": a pyenv shim with no version selected is on PATH but exits 127.
python3_path() {
    local candidate
    for candidate in "$(command -v python3 2>/dev/null)" /usr/bin/python3; do
        if [ -n "$candidate" ] && [ -x "$candidate" ] && "$candidate" -c 'import json' >/dev/null 2>&1; then
            echo "$candidate"
            return 0
        fi
    done
    return 0
}

# repository_folder_reason DIR [ALSO]: why the folder DIR (an absolute path) may not take a script's
# outputs, or nothing when it may: it is the repository's root or holds the repository's own files (docs, a
# lesson), among which the outputs would sit; or it lies elsewhere in the repository than out/, a build
# folder or ALSO (a folder relative to the root: docs/results for the scripts that record results there),
# where git would list the outputs and the docs' check would take a comparison.md for one of the docs.
repository_folder_reason() {
    local dir="$1" also="${2:-}" root inside
    root="$(realpath -m -- "$ROOT")"
    # ":(literal)": the path as it is, not a pattern (a * or ? in a folder's name).
    if [ "$dir" = "$root" ] || [ -n "$(git -C "$ROOT" ls-files -- ":(literal)$dir" 2>/dev/null | head -n 1)" ]; then
        echo "'$dir' holds the repository's own files"
    elif [[ "$dir/" == "$root/"* ]]; then
        inside="${dir#"$root/"}/"
        case "$inside" in
            out/* | build*/*) ;;
            *) [[ -n "$also" && "$inside" == "$also/"* ]] ||
                echo "'$dir' is in the repository but not in out/ or a build folder, where outputs go (out/NAME, say): git would list them, and the docs' check read their Markdown as docs" ;;
        esac
    fi
}

# Why no file can be written in the folder DIR (made if missing), or nothing when one can: how the scripts
# check their --out before they build or run anything (a permission, a read-only file system, a file where
# a folder should be).
unwritable_folder_reason() {
    local dir="$1" probe
    if [[ -e "$dir" && ! -d "$dir" ]]; then echo "'$dir' is a file, not a folder"; return 0; fi
    mkdir -p -- "$dir" 2>/dev/null || { echo "cannot create the folder '$dir'"; return 0; }
    probe="$(mktemp -p "$dir" .write-test.XXXXXX 2>/dev/null)" || { echo "cannot create a file in '$dir'"; return 0; }
    rm -f -- "$probe"  # ours, just made
}

# shell_line WORD...: the words as one line a shell reads back as them (printf's %q, as the cluster
# recipes' fwi_launch prints its launch line), so that a recorded command can be pasted.
shell_line() {
    local line
    line="$(printf '%q ' "$@")"
    printf '%s\n' "${line% }"
}

# The outermost folder that `mkdir -p DIR` (unwritable_folder_reason) would make, or nothing when DIR
# exists: what a script that refuses after that check removes again (remove_made_folders).
first_missing_folder() {
    local dir="$1" missing=""
    while [ ! -e "$dir" ] && [ ! -L "$dir" ]; do
        missing="$dir"
        dir="$(dirname -- "$dir")"
    done
    echo "$missing"
}

# Removes DIR and then its parents, up to and with FIRST (first_missing_folder's answer before the
# folders were made), each only while empty: the folders a refusing script made, and nothing of a user's.
remove_made_folders() {
    local dir="$1" first="$2"
    [ -n "$first" ] || return 0
    while rmdir -- "$dir" 2>/dev/null && [ "$dir" != "$first" ]; do
        dir="$(dirname -- "$dir")"
    done
}

# run_with_timeout SECONDS COMMAND...: COMMAND under timeout(1), with SIGKILL 30 s after its SIGTERM; its
# exit status (124 when stopped at the limit). timeout runs COMMAND in a process group of its own, which
# the terminal's Ctrl-C does not reach, so Ctrl-C or SIGTERM of the script is passed on to it: the
# script then ends by the same signal (so a script that called it stops too) and leaves no program
# running behind it.
run_with_timeout() {
    local seconds="$1"
    shift
    timeout --kill-after=30 "$seconds" "$@" &
    local child=$!
    local signal
    for signal in INT TERM; do
        trap "kill -TERM $child 2>/dev/null; wait $child 2>/dev/null; trap - $signal; kill -$signal \$\$" "$signal"
    done
    wait "$child"
    local status=$?
    trap - INT TERM
    return $status
}

# run_within SECONDS COMMAND...: COMMAND under run_with_timeout (so that Ctrl-C stops the script here too:
# timeout puts COMMAND in a process group of its own, which the terminal's signal does not reach). COMMAND's
# exit status; 124 (or 137) when it was stopped, with a line on stderr saying so.
run_within() {
    local seconds="$1"
    shift
    run_with_timeout "$seconds" "$@"
    local status=$?
    [ $status -ne 124 ] && [ $status -ne 137 ] || echo "warning: '$*' did not answer within $seconds s, so it was stopped" >&2
    return $status
}

# quick_query COMMAND...: a query that answers at once when all is well (nvidia-smi, visible_gpus, mpirun
# --version), under a 60 s limit: a hung driver or launcher would otherwise block the script for good.
quick_query() { run_within 60 "$@"; }

# open_mpi_major LAUNCHER: Open MPI's major version ("4" of "mpirun (Open MPI) 4.1.6") where LAUNCHER is Open
# MPI's mpirun, else nothing (MPICH's, srun, none at all).
open_mpi_major() { open_mpi_major_in "$(quick_query "$1" --version 2>&1)"; }
# open_mpi_major_in TEXT: the same, from TEXT, what a launcher's --version answered.
open_mpi_major_in() { sed -n 's/.*(\(Open MPI\|OpenRTE\)) \([0-9][0-9]*\)\..*/\2/p' <<<"$1" | head -n 1; }

# skip_unless_open_mpi LAUNCHER: for a test that passes Open MPI's own flags (--oversubscribe, -x) to
# LAUNCHER: exits 77 (CTest: skipped), saying why, where LAUNCHER is another MPI's; exits 1 (failed) where
# LAUNCHER's --version does not run, fails or says nothing: a broken MPI is no other MPI.
skip_unless_open_mpi() {
    local answer status=0
    answer="$(quick_query "$1" --version 2>&1)" || status=$?
    [ -n "$(open_mpi_major_in "$answer")" ] && return 0
    if [ $status -ne 0 ] || [ -z "${answer//[[:space:]]/}" ]; then
        echo "FAILED: '$1 --version' does not answer (exit $status${answer:+: $(echo "$answer" | head -n 1)}): is MPI installed?"
        exit 1
    fi
    echo "needs Open MPI's mpirun (this test passes it --oversubscribe and -x); $1 is another launcher: skipped"
    exit 77
}

# mpi_launcher: the words that start the suite's MPI runs, one per line (read them with mapfile). With
# Open MPI's mpirun, --bind-to none: a rank's CUDA and NCCL helper threads must not share one core with it;
# --oversubscribe: containers often show fewer "slots" than GPUs need; -x hands the ranks the multicast
# setting; as root, --allow-run-as-root. Another MPI's mpirun (MPICH's passes the whole environment) gets
# none of them.
mpi_launcher() {
    echo mpirun
    [ -n "$(open_mpi_major mpirun)" ] || return 0
    printf '%s\n' --oversubscribe --bind-to none -x NCCL_NVLS_ENABLE=0
    [ "$(id -u)" -ne 0 ] || echo --allow-run-as-root
}

# gpus_take_one_process: succeeds where nvidia-smi reports a GPU in exclusive-process compute mode (common on
# clusters), which takes one process at a time: tests run at once on it would fail each other.
gpus_take_one_process() {
    local modes
    modes=$(quick_query nvidia-smi --query-gpu=compute_mode --format=csv,noheader 2>/dev/null) || true
    [[ "$modes" == *Exclusive_Process* ]]
}

# skip_where_gpus_take_one_process WHY: for a test that puts two processes on one GPU: exits 77 (CTest:
# skipped), saying so and WHY, where a GPU is in exclusive-process compute mode.
skip_where_gpus_take_one_process() {
    gpus_take_one_process || return 0
    echo "SKIPPED: a GPU is in exclusive-process compute mode (one process at a time), and $1"
    exit 77
}

# count_visible_gpus COUNTER: how many GPUs CUDA shows this process, as the programs count them (COUNTER:
# the build's common/visible_gpus), under quick_query's limit. The number on stdout; or, when the counter
# fails, does not answer or prints no number (a broken build), a message on stderr and status 1.
count_visible_gpus() {
    local count status
    count=$(quick_query "$1")
    status=$?
    if [ $status -ne 0 ]; then
        echo "the GPU counter $1 failed (exit $status), so the GPUs cannot be counted" >&2
        return 1
    fi
    if ! [[ "$count" =~ ^[0-9]{1,6}$ ]]; then
        echo "the GPU counter $1 printed '$count', not a number of GPUs" >&2
        return 1
    fi
    echo "$count"
}

# The CUDA settings CMake takes from the environment, checked before they reach it: CMake keeps a
# CUDAARCHS in the build folder's cache even when it failed, so a mistyped one would break later builds
# without it too, and an empty one builds for nvcc's oldest default GPU without a word. Exit 2 (CUDAARCHS)
# or 3 (CUDACXX) with what to do.
check_cuda_environment() {
    if [ -n "${CUDAARCHS+set}" ]; then
        local arch='[0-9]+[a-z]?(-real|-virtual)?'
        if [ -z "$CUDAARCHS" ] || ! [[ "$CUDAARCHS" =~ ^(all|all-major|native|OFF|$arch(\;$arch)*)$ ]]; then
            echo "error: CUDAARCHS='$CUDAARCHS' is not a list of CUDA architectures like 90, '80;90', 90-real or native; unset it to build for the GPUs present (env -u CUDAARCHS ...)" >&2
            exit 2
        fi
    fi
    # CMake takes CUDACXX's first word as the program (found on PATH when it has no /), the rest as flags.
    local compiler
    read -r compiler _ <<<"${CUDACXX:-}"
    if [ -n "${CUDACXX:-}" ] && ! command -v -- "$compiler" >/dev/null 2>&1; then
        echo "error: CUDACXX='$CUDACXX' does not name a program; point it at nvcc, or unset it to use the nvcc on PATH" >&2
        exit 3
    fi
}

# lock_build_folder FOLDER: holds a lock on FOLDER until this script ends (scripts it starts inherit it), so
# that two of the suite's scripts never build or run in one build folder at once: two builds in one tree
# write the same files, two test runs delete each other's scratch folders, and two comparisons time each
# other. A second script exits 3 at once, naming the first. The lock is a file beside the folder
# (build/ -> .build.lock), which survives the folder's removal for a fresh build. Without flock
# (util-linux), or where that file cannot be written, there is no lock.
lock_build_folder() {
    local folder="$1" lock fd holder
    [ "${FWI_BUILD_LOCK:-}" = "$folder" ] && return 0  # a script that started this one holds it
    command -v flock >/dev/null 2>&1 || return 0
    lock="$(dirname -- "$folder")/.$(basename -- "$folder").lock"
    # Read-only where another user made the file (flock takes either); no lock where neither opens.
    { exec {fd}>>"$lock" || exec {fd}<"$lock"; } 2>/dev/null || return 0
    if ! flock -n "$fd"; then
        holder="$(head -c 300 -- "$lock" 2>/dev/null)"
        local pid="${holder#process }"
        pid="${pid%%,*}"
        if [[ "$pid" =~ ^[0-9]+$ ]] && [ ! -d "/proc/$pid" ]; then
            holder+="; that script has ended, but a program it started still holds the lock ('fuser -v $lock' names it): end that program"
        fi
        echo "error: another of the suite's scripts is using $folder (${holder:-its process did not say which}); wait for it to end and run again" >&2
        exit 3
    fi
    # Who holds it, for a second script to name; not where the file is another user's (opened read-only
    # above), which under set -e would end the script without a word.
    { printf 'process %s, %s, started %s' "$$" "$(basename -- "$0")" "$(date '+%Y-%m-%d %H:%M:%S')" >"$lock"; } \
        2>/dev/null || true
    export FWI_BUILD_LOCK="$folder"
}

# require_writable_build_folder FOLDER: exit 3 unless FOLDER, or where it is missing the folder it would be
# made in, can be written (nothing is made): a clone in a read-only place, or a build folder another user
# made, is said before anything is installed or built.
require_writable_build_folder() {
    local dir="$1"
    while [ ! -e "$dir" ] && [ ! -L "$dir" ]; do dir="$(dirname -- "$dir")"; done
    [ -d "$dir" ] && [ -w "$dir" ] && [ -x "$dir" ] && return 0
    echo "error: cannot write '$dir', where the scripts build (in $1, beside the sources): clone the repository into a folder you can write (or, for a build folder another user made, ask them to remove it)" >&2
    exit 3
}

# configure_and_build PRESET: installs what is missing, then configures and builds PRESET (CMakePresets.json).
# The scripts build the default preset on every machine, into build/: for the GPUs present at its first
# configure (kept until `cmake --preset default --fresh`), or without one
# for A100 and H100/H200 + PTX; the ci preset (into build-ci/; sm_90 + PTX where no GPU is visible) is a
# quicker build by hand.
configure_and_build() {
    local preset="$1" folder="$BUILD_DIR" first=""
    [ "$preset" = default ] || folder="$ROOT/build-$preset"
    check_cuda_environment
    require_writable_build_folder "$folder"
    install_missing_packages
    lock_build_folder "$folder"
    [ -e "$folder/CMakeCache.txt" ] || first=yes
    if ! (cd "$ROOT" && cmake --preset "$preset" >/dev/null); then
        # A folder's first configure that failed leaves no cache: CMake would keep what it was given there
        # (a CUDAARCHS of no GPU, CUDACXX's flags) for every later configure, made without them too.
        if [ -n "$first" ]; then
            rm -rf -- "$folder/CMakeCache.txt" "$folder/CMakeFiles"
            echo "error: the first configure of $folder failed (CMake's messages above); its cache was removed, so the next configure starts afresh" >&2
        fi
        return 1
    fi
    (cd "$ROOT" && cmake --build --preset "$preset" -j "$(nproc)")
}

# Where the default preset builds (its binaryDir in CMakePresets.json; another preset's: build-PRESET).
BUILD_DIR="$ROOT/build"
