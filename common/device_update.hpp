// The model update of update.hpp on the device: the gradient and the model never leave the GPU.
#pragma once

#include <cuda_runtime.h>

#include "gpu_resources.hpp"
#include "problem.hpp"

namespace fwi {

class DeviceModelUpdate {
public:
    // On the current device.
    explicit DeviceModelUpdate(const Problem& problem);
    // velocity -= step * weighted gradient, as update_model does on the host; enqueued on `stream`.
    // The largest |scaled gradient| is found by an atomic maximum over the bits of non-negative floats,
    // which is exact and independent of the order the blocks run in: every GPU holding the same gradient
    // computes the same model, bit for bit.
    void apply(const float* gradient, float* velocity, cudaStream_t stream);

private:
    Problem problem_;
    DeviceBuffer<float> depth_weights_;
    DeviceBuffer<unsigned> largest_bits_;  // the largest scaled |gradient|, as float bits
};

}  // namespace fwi
