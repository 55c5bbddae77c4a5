// The allreduce's input: small integers, so every partial sum is exact in float whatever the order
// of additions, and a correct result matches the expected sum bit for bit.
#pragma once

#include <cstddef>

#include "stencil.hpp"  // FWI_HD: __host__ __device__ under nvcc

namespace fwi {

// Rank r's element i: an integer in -8..8.
FWI_HD float input_value(int rank, size_t index) {
    return static_cast<float>(static_cast<int>((index * 7 + static_cast<size_t>(rank) * 3) % 17) - 8);
}

FWI_HD float expected_sum(int ranks, size_t index) {
    float sum = 0.0f;
    for (int rank = 0; rank < ranks; ++rank) sum += input_value(rank, index);
    return sum;
}

}  // namespace fwi
