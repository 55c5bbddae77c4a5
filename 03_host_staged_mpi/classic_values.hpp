// The classic allreduce check: rank r contributes r + 0.001 i at element i, so over W ranks the sum is
// W (W-1)/2 + 0.001 i W.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace fwi {

inline std::vector<float> classic_contribution(int rank, size_t count) {
    std::vector<float> values(count);
    for (size_t i = 0; i < count; ++i) values[i] = float(rank) + 0.001f * float(i);
    return values;
}

inline double classic_sum(int ranks, size_t i) { return ranks * (ranks - 1) / 2.0 + 0.001 * double(i) * ranks; }

// Elements that differ from the classic sum by more than float rounding of the inputs and of the W-1
// additions (far below 1e-6 relative, whatever the order MPI adds in).
inline long long count_wrong_sums(const float* values, size_t count, int ranks) {
    long long wrong = 0;
    for (size_t i = 0; i < count; ++i) {
        const double expected = classic_sum(ranks, i);
        wrong += !(std::abs(double(values[i]) - expected) <= 1e-6 * std::max(1.0, std::abs(expected)));
    }
    return wrong;
}

}  // namespace fwi
