// The summation every hand-rolled variant shares: out[i] = in_0[i] + in_1[i] + ... for a range of
// elements, with 16-byte vector loads, several vectors in flight per thread (so enough bytes are on
// the way to hide memory or NVLink latency), and the inputs always added in the order given (so every
// GPU that sums the same inputs gets the same bits). The inputs may live on peer GPUs.
#pragma once

#include <cstddef>

#include "device.hpp"
#include "gpu_group.hpp"

namespace fwi {

constexpr int kSumThreads = 512;
constexpr int kVectorsPerThread = 2;

struct SumOperands {
    const float* inputs[kMaxRanks];
    float* outputs[kMaxRanks];  // the sum is stored to each of them (two-shot: every GPU's buffer)
    int input_count;
    int output_count;
};

// Blocks for summing `count` elements: enough to cover them, at most `max_blocks`.
inline unsigned sum_blocks(size_t count, int max_blocks) {
    const size_t vectors = (count + 3) / 4;  // float4s, the last one partly filled
    return grid_stride_blocks(vectors, kSumThreads * kVectorsPerThread, unsigned(max_blocks));
}

__device__ inline float4 operator+(float4 a, float4 b) { return {a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w}; }

// Sums elements [begin, end) of the operands, spread over the calling grid. `begin` must be a
// multiple of 4 and every pointer 16-byte aligned.
__device__ inline void sum_range(const SumOperands& op, size_t begin, size_t end) {
    const size_t vectors = (end - begin) / 4;
    const size_t first_vector = begin / 4;
    const size_t tile = size_t(blockDim.x) * kVectorsPerThread;
    for (size_t base = blockIdx.x * tile; base < vectors; base += gridDim.x * tile) {
        float4 loaded[kMaxRanks][kVectorsPerThread];
#pragma unroll
        for (int input = 0; input < kMaxRanks; ++input)
#pragma unroll
            for (int j = 0; j < kVectorsPerThread; ++j) {
                const size_t v = base + threadIdx.x + j * blockDim.x;
                if (input < op.input_count && v < vectors)
                    loaded[input][j] = reinterpret_cast<const float4*>(op.inputs[input])[first_vector + v];
            }
#pragma unroll
        for (int j = 0; j < kVectorsPerThread; ++j) {
            const size_t v = base + threadIdx.x + j * blockDim.x;
            if (v >= vectors) continue;
            float4 sum = loaded[0][j];
#pragma unroll
            for (int input = 1; input < kMaxRanks; ++input)
                if (input < op.input_count) sum = sum + loaded[input][j];
            for (int output = 0; output < op.output_count; ++output)
                reinterpret_cast<float4*>(op.outputs[output])[first_vector + v] = sum;
        }
    }
    // The last count % 4 elements, one per thread of block 0.
    const size_t i = begin + vectors * 4 + threadIdx.x;
    if (blockIdx.x == 0 && i < end) {
        float sum = op.inputs[0][i];
        for (int input = 1; input < op.input_count; ++input) sum += op.inputs[input][i];
        for (int output = 0; output < op.output_count; ++output) op.outputs[output][i] = sum;
    }
}

}  // namespace fwi
