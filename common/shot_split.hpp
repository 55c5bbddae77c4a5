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
    std::string text() const;  // "first..last", as the programs print a share of the shots
};

// Every shot, 0 .. nshots-1: what a single GPU computes.
inline std::vector<int> all_shots(int nshots) { return ShotRange{0, nshots}.shots(); }

// The range of part `part` (0-based) of `parts`. Throws UsageError when there are more parts than
// shots (a rank with no shot has nothing to compute), calling the parts `what` ("ranks", "GPUs"), or
// when the arguments are out of range.
ShotRange split_shots(int nshots, int parts, int part, const std::string& what = "ranks");

// The size of the batches that `shots` shots make at most `most` at a time, spread evenly: 8 shots at
// most 5 at a time are 4 + 4, not 5 + 3. 0 when either is below 1.
int even_batch(int shots, int most);

// How many shots a GPU's gradient advances at once: the forward pass `gradient` (and keeps their history),
// the adjoint pass `adjoint_group` of those at a time, spread evenly over the groups from at most
// `adjoint_most`. `in_memory`: the shots whose gradient fits the GPU's free memory; `forward_in_cache` and
// `adjoint_in_cache`: the shots whose step working sets fit the part of the L2 cache they may use
// (GpuPropagator::choose_batches says why). All 0 when not one shot fits memory. A batch of fewer shots
// (a GPU's share of them) is grouped from adjoint_most again: even_batch(its shots, adjoint_most), which
// for the largest share, ceil(shots / GPUs), is what the plan for that many shots gives.
struct ShotBatches {
    int gradient = 0;
    int adjoint_group = 0;
    int adjoint_most = 0;
};
ShotBatches plan_shot_batches(int nshots, int in_memory, int forward_in_cache, int adjoint_in_cache);

}  // namespace fwi
