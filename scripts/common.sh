# Sourced by the scripts in this folder: installs what is missing, and configures and builds the suite.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# NVLink multicast (NVLS) stays off in everything this suite starts.
export NCCL_NVLS_ENABLE=0

# The CUDA toolkit is a prerequisite; put its nvcc on PATH if it is installed in the usual place.
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
    export PATH=/usr/local/cuda/bin:$PATH
fi

# Installs the Debian/Ubuntu packages that are missing, and only those, so it also runs where nothing
# can be installed as long as everything is already there.
install_missing_packages() {
    local missing=()
    command -v cmake >/dev/null 2>&1 || missing+=(cmake)
    command -v g++ >/dev/null 2>&1 || missing+=(g++)
    command -v mpicxx >/dev/null 2>&1 || missing+=(libopenmpi-dev)
    command -v mpirun >/dev/null 2>&1 || missing+=(openmpi-bin)
    [ -f /usr/include/doctest/doctest.h ] || missing+=(doctest-dev)
    [ -f /usr/include/benchmark/benchmark.h ] || missing+=(libbenchmark-dev)
    # The comparison's chart and 06's pictures (either python3 may have matplotlib).
    python3 -c 'import matplotlib' >/dev/null 2>&1 || /usr/bin/python3 -c 'import matplotlib' >/dev/null 2>&1 ||
        missing+=(python3-matplotlib)
    if [ ${#missing[@]} -eq 0 ]; then return 0; fi
    echo "installing missing packages: ${missing[*]}"
    local sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    if ! { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"; }; then
        echo "error: could not install ${missing[*]}; install them and run again" >&2
        exit 3
    fi
}

require_nvcc() {
    if ! command -v nvcc >/dev/null 2>&1; then
        echo "error: the CUDA toolkit (nvcc) is not installed; install CUDA 12.4 or newer and run again" >&2
        exit 3
    fi
}

# The default preset builds for the GPUs present; with none visible, the ci preset (sm_90 + PTX).
choose_preset() {
    if nvidia-smi -L >/dev/null 2>&1; then echo default; else echo ci; fi
}

configure_and_build() {
    local preset="$1"
    install_missing_packages
    require_nvcc
    (cd "$ROOT" && cmake --preset "$preset" >/dev/null && cmake --build --preset "$preset" -j "$(nproc)")
}

build_dir() {
    if [ "$1" = default ]; then echo "$ROOT/build"; else echo "$ROOT/build-$1"; fi
}
