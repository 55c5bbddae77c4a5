// nccl-tests' bandwidth figures for an allreduce.
//   algbw = bytes / time: how fast the user's buffer gets reduced.
//   busbw = algbw * 2(n-1)/n: the traffic each GPU's link must carry (every rank sends and receives
//   2(n-1)/n of the buffer in an optimal allreduce), so busbw compares with the link's bandwidth and
//   stays comparable across GPU counts.
#pragma once

#include <cstddef>

namespace fwi {

inline double algorithm_bandwidth(size_t bytes, double seconds) { return bytes / seconds; }

inline double bus_bandwidth_factor(int ranks) { return 2.0 * (ranks - 1) / ranks; }

inline double bus_bandwidth(size_t bytes, double seconds, int ranks) {
    return algorithm_bandwidth(bytes, seconds) * bus_bandwidth_factor(ranks);
}

}  // namespace fwi
