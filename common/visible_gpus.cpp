// Prints how many CUDA GPUs are visible (0 without a GPU or driver). The GPU tests' script
// (run_if_gpus.sh) asks it, so that a test needing more GPUs than there are is skipped, not failed.
#include <cstdio>

#include "device.hpp"

int main() {
    std::printf("%d\n", fwi::visible_gpu_count());
    return 0;
}
