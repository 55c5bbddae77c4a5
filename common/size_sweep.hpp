// The message sizes of a sweep: min, min*f, min*f^2, ... up to max (nccl-tests' -b/-e/-f), each
// rounded down to whole floats, plus one extra size of interest (the FWI gradient) when in range.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace fwi {

inline std::vector<size_t> sweep_byte_sizes(size_t min_bytes, size_t max_bytes, double step_factor,
                                            size_t extra_bytes) {
    const auto whole_floats = [](double bytes) { return static_cast<size_t>(bytes) / 4 * 4; };
    std::vector<size_t> sizes;
    for (double bytes = static_cast<double>(min_bytes); bytes <= static_cast<double>(max_bytes);
         bytes *= step_factor)
        if (whole_floats(bytes) > 0) sizes.push_back(whole_floats(bytes));
    if (extra_bytes >= min_bytes && extra_bytes <= max_bytes) sizes.push_back(whole_floats(extra_bytes));
    std::sort(sizes.begin(), sizes.end());
    sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
    return sizes;
}

}  // namespace fwi
