// Elapsed device time between two timing events recorded on a stream: elapsed_seconds for events the
// caller has waited for, CudaEventTimer for a pair it starts and stops.
#pragma once

#include <cuda_runtime.h>

#include "cuda_check.hpp"
#include "gpu_resources.hpp"

namespace fwi {

// The time from `start` to `stop` (both made with CudaEvent::Timing::on), in seconds, once both are
// complete: the caller waits for `stop` first (a CUDA error otherwise).
inline double elapsed_seconds(const CudaEvent& start, const CudaEvent& stop) {
    float ms = 0.0f;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start.get(), stop.get()));
    return 1e-3 * ms;
}

class CudaEventTimer {
public:
    void start(cudaStream_t stream = nullptr) { CUDA_CHECK(cudaEventRecord(start_.get(), stream)); }
    void stop(cudaStream_t stream = nullptr) { CUDA_CHECK(cudaEventRecord(stop_.get(), stream)); }

    // Waits for the stop event and returns the time between the two events.
    double seconds() const {
        CUDA_CHECK(cudaEventSynchronize(stop_.get()));
        return elapsed_seconds(start_, stop_);
    }

private:
    // Both on the device current when the timer is made; record them on a stream of that device.
    CudaEvent start_{current_device(), CudaEvent::Timing::on}, stop_{current_device(), CudaEvent::Timing::on};
};

}  // namespace fwi
