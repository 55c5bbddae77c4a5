// CudaEventTimer: elapsed device time between two events recorded on a stream.
#pragma once

#include <cuda_runtime.h>

#include "cuda_check.hpp"
#include "gpu_resources.hpp"

namespace fwi {

class CudaEventTimer {
public:
    void start(cudaStream_t stream = nullptr) { CUDA_CHECK(cudaEventRecord(start_.get(), stream)); }
    void stop(cudaStream_t stream = nullptr) { CUDA_CHECK(cudaEventRecord(stop_.get(), stream)); }

    // Waits for the stop event and returns the time between the two events.
    double seconds() const {
        CUDA_CHECK(cudaEventSynchronize(stop_.get()));
        float ms = 0.0f;
        CUDA_CHECK(cudaEventElapsedTime(&ms, start_.get(), stop_.get()));
        return 1e-3 * ms;
    }

private:
    // Both on the device current when the timer is made; record them on a stream of that device.
    CudaEvent start_{current_device(), CudaEvent::Timing::on}, stop_{current_device(), CudaEvent::Timing::on};
};

}  // namespace fwi
