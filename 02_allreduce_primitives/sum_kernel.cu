#include "sum_kernel.cuh"

namespace fwi {

namespace {

__global__ void __launch_bounds__(kSumThreads) sum_kernel(SumOperands operands, size_t count) {
    sum_range(operands, 0, count);
}

}  // namespace

void launch_sum(const SumOperands& operands, size_t count, int max_blocks, cudaStream_t stream) {
    sum_kernel<<<sum_blocks(count, max_blocks), kSumThreads, 0, stream>>>(operands, count);
    CUDA_CHECK_LAUNCH();
}

}  // namespace fwi
