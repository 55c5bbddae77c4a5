// doctest main for GPU tests: with no GPU visible the whole executable is skipped (exit 77, which CTest
// shows as skipped through SKIP_RETURN_CODE), never passed; with a driver CUDA cannot use, it fails
// (exit 3, saying why) rather than skip; filters that select no test case fail it (selected_test_cases.hpp).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include "device.hpp"
#include "errors.hpp"
#include "selected_test_cases.hpp"

int main(int argc, char** argv) {
    return fwi::run_program("GPU tests", [&] {
        if (fwi::visible_gpu_count_checked() < 1) {
            std::printf("no CUDA GPU visible: GPU tests skipped\n");
            return int(fwi::kExitSkipped);
        }
        doctest::Context context(argc, argv);
        return fwi::run_selected_test_cases(context);
    });
}
