// The combine variants on the GPU: a device buffer summed over the MPI ranks in place, through a host
// staging buffer (pageable, pinned, pipelined) or handed to MPI directly (cuda_aware).
#pragma once

#include <cuda_runtime.h>
#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "combine_steps.hpp"
#include "gpu_resources.hpp"
#include "variants.hpp"

namespace fwi {

// StagingCopies on a GPU: one stream per direction (so both copy engines work) and a pair of events
// around each copy: the one after a to-host copy tells the host that the chunk arrived, and each pair
// gives the copy's time on its lane.
class CudaStagingCopies final : public StagingCopies {
public:
    CudaStagingCopies(float* device, float* host);

    float* host() override { return host_; }
    void begin(size_t chunks) override;
    void start_to_host(size_t index, const Chunk& chunk) override;
    bool arrived_on_host(size_t index) override;
    void wait_on_host(size_t index) override;
    void start_to_device(size_t index, const Chunk& chunk) override;
    void wait_on_device() override;
    double to_host_busy_seconds() override;
    double to_device_busy_seconds() override;

private:
    float* device_;
    float* host_;
    size_t chunks_ = 0;
    CudaStream to_host_stream_, to_device_stream_;
    std::vector<CudaEvent> to_host_started_, arrived_, to_device_started_, to_device_done_;  // with timing
};

// One variant, set up for up to `max_count` floats at `device` (on the current GPU). Collective over MPI_COMM_WORLD
// for cuda_aware, whose availability every rank takes from all (cuda_aware_unavailable_reason, timeout_s).
class DeviceCombine {
public:
    DeviceCombine(const VariantSpec& spec, float* device, size_t max_count, MPI_Comm comm, double timeout_s);
    // Empty when the variant can run here (cuda_aware needs a CUDA-aware MPI), else the reason.
    const std::string& unavailable_reason() const { return unavailable_reason_; }
    // Sums the first `count` floats of the device buffer over the ranks, in place. The caller makes sure
    // the buffer is complete (synchronized) before; the sum is complete on the device when this returns.
    CombineTimes combine(size_t count);

private:
    VariantSpec spec_;
    float* device_;
    MPI_Comm comm_;
    std::string unavailable_reason_;
    std::vector<float> pageable_;
    // Page-locked host memory: the copy engines read and write it directly, at full speed and asynchronously
    // to the host thread. Pageable memory is copied through a driver buffer, in pieces.
    PinnedBuffer<float> pinned_;
    std::unique_ptr<CudaStagingCopies> copies_;
};

}  // namespace fwi
