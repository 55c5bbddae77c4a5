// nccl-tests' bandwidth figures for an allreduce.
//   algbw = bytes / time: how fast the user's buffer gets reduced.
//   busbw = algbw * 2(n-1)/n: the traffic each GPU's link must carry (every rank sends and receives
//   2(n-1)/n of the buffer in an optimal allreduce), so busbw compares with the link's bandwidth and
//   stays comparable across GPU counts.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>

namespace fwi {

inline double algorithm_bandwidth(size_t bytes, double seconds) { return bytes / seconds; }

inline double bus_bandwidth_factor(int ranks) { return 2.0 * (ranks - 1) / ranks; }

inline double bus_bandwidth(size_t bytes, double seconds, int ranks) {
    return algorithm_bandwidth(bytes, seconds) * bus_bandwidth_factor(ranks);
}

// nccl-tests' table, shared by every lesson that sweeps allreduce sizes (02, 03, 05) so their rows compare
// line by line.
inline void print_bandwidth_table_header(const std::string& title) {
    std::printf("\n# %s\n", title.c_str());
    std::printf("#%14s %12s %11s %12s %12s %7s\n", "size(B)", "count", "time(us)", "algbw(GB/s)", "busbw(GB/s)",
                "#wrong");
}

// One row: `bytes` of floats reduced in `seconds` over `ranks`; `note` goes at the end of the row.
inline void print_bandwidth_table_row(size_t bytes, double seconds, int ranks, long long wrong,
                                      const std::string& note) {
    std::printf("%15zu %12zu %11.2f %12.2f %12.2f %7lld%s%s\n", bytes, bytes / sizeof(float), seconds * 1e6,
                algorithm_bandwidth(bytes, seconds) / 1e9, bus_bandwidth(bytes, seconds, ranks) / 1e9, wrong,
                note.empty() ? "" : "  ", note.c_str());
    std::fflush(stdout);
}

}  // namespace fwi
