// The allreduce bench's data, nccl-tests' classic shape: rank r's element i is (r + 1) + 0.001 (i mod 1000),
// so every rank adds at least 1 to every element and a result that misses a rank is off by at least 1.
// These floats do not add exactly, and NCCL's order of additions depends on the algorithm: a result is
// right when it is within the rounding of its additions of the exact sum (float64, of the same floats).
#pragma once

#include <cmath>
#include <cstddef>

#include "stencil.hpp"  // FWI_HD: __host__ __device__ under nvcc

namespace fwi {

FWI_HD float bench_input(int rank, size_t index) {
    return static_cast<float>(rank + 1) + 0.001f * static_cast<float>(index % 1000);
}

// Each of the ranks - 1 additions rounds by at most half an ulp of a partial sum, and no partial sum
// exceeds the sum of the magnitudes: |error| <= (ranks - 1) * 2^-24 * sum |x|. Twice that is allowed.
FWI_HD bool bench_result_ok(float result, int ranks, size_t index) {
    double exact = 0.0, magnitude = 0.0;
    for (int rank = 0; rank < ranks; ++rank) {
        const double x = bench_input(rank, index);
        exact += x;
        magnitude += fabs(x);
    }
    const double tolerance = 2.0 * (ranks - 1) * 5.9604644775390625e-8 * magnitude;
    return fabs(static_cast<double>(result) - exact) <= tolerance;  // false for NaN (a poisoned element)
}

}  // namespace fwi
