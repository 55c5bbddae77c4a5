// Summing on one GPU (via_gpu0 on GPU 0, the ring's reductions): a kernel around sum_range.
#pragma once

#include "cuda_check.hpp"
#include "device_sum.cuh"

namespace fwi {

// Enqueues outputs = sum of `inputs` (count floats) on `stream`, using at most `max_blocks` blocks.
void launch_sum(const SumOperands& operands, size_t count, int max_blocks, cudaStream_t stream);

}  // namespace fwi
