// Splitting shots over ranks or GPUs: contiguous ranges, the remainder spread over the first parts
// (8 shots on 3 ranks: 3, 3, 2). Every shot is in exactly one range, in order.
#pragma once

#include <string>
#include <vector>

namespace fwi {

struct ShotRange {
    int first = 0;  // first shot
    int count = 0;  // number of shots
    std::vector<int> shots() const;
};

// Every shot, 0 .. nshots-1: what a single GPU computes.
inline std::vector<int> all_shots(int nshots) { return ShotRange{0, nshots}.shots(); }

// The range of part `part` (0-based) of `parts`. Throws UsageError when there are more parts than
// shots (a rank with no shot has nothing to compute), calling the parts `what` ("ranks", "GPUs"), or
// when the arguments are out of range.
ShotRange split_shots(int nshots, int parts, int part, const std::string& what = "ranks");

}  // namespace fwi
