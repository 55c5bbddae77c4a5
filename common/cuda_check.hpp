// CUDA_CHECK(call): throws fwi::EnvironmentError naming the call, file, line and CUDA's error string.
// CUDA_CHECK_LAUNCH(): the same for the last kernel launch.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "errors.hpp"

namespace fwi {

[[noreturn]] inline void throw_cuda_error(cudaError_t status, const char* call, const char* file, int line) {
    throw EnvironmentError(std::string("CUDA call `") + call + "` failed at " + file + ":" +
                           std::to_string(line) + ": " + cudaGetErrorName(status) + " (" +
                           cudaGetErrorString(status) + ")");
}

}  // namespace fwi

#define CUDA_CHECK(call)                                                        \
    do {                                                                        \
        const cudaError_t cuda_check_status_ = (call);                          \
        if (cuda_check_status_ != cudaSuccess)                                  \
            ::fwi::throw_cuda_error(cuda_check_status_, #call, __FILE__, __LINE__); \
    } while (0)

#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())
