// doctest main for GPU tests: with no GPU visible the whole executable is skipped (exit 77, which CTest
// shows as skipped through SKIP_RETURN_CODE), never passed.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include "device.hpp"

int main(int argc, char** argv) {
    if (fwi::visible_gpu_count() < 1) {
        std::printf("no CUDA GPU visible: GPU tests skipped\n");
        return fwi::kExitSkipped;
    }
    doctest::Context context(argc, argv);
    return context.run();
}
