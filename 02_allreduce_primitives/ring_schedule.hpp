// The ring allreduce's schedule as pure functions: how a buffer is split into one segment per rank and
// each segment into chunks, and which segment every rank receives at every step. The GPU ring variant
// and the host simulation in the tests both follow these functions, so the tests check the schedule
// the GPUs run.
//
// Ring: rank r receives from rank r-1 (mod n). Steps 0..n-2 are the reduce-scatter: at step k rank r
// receives segment (r-k-1) mod n and adds its own contribution. After them rank r holds the full sum
// of segment (r+1) mod n. Steps n-1..2n-3 are the all-gather: at step n-1+g rank r receives the finished
// segment (r-g) mod n and stores it. What a rank receives at step k it sends at step k+1.
#pragma once

#include <cstddef>

namespace fwi {

// Half-open element range [begin, end).
struct ElementRange {
    size_t begin = 0;
    size_t end = 0;
    size_t size() const { return end - begin; }
    bool empty() const { return end == begin; }
};

// Splits `count` elements into `parts` consecutive ranges whose boundaries are multiples of `granule`
// (so vector loads stay aligned): they differ by at most one granule, plus the partial granule at the
// end of the buffer; trailing parts may be empty.
ElementRange split_evenly(size_t count, int parts, int index, size_t granule);

enum class RingPhase { ReduceScatter, AllGather };

struct RingStep {
    RingPhase phase;
    int segment;            // the segment the rank receives (and the sender sends) at this step
    bool from_send_buffer;  // the sender reads its input buffer (step 0), not its partial result
};

inline int ring_steps(int ranks) { return 2 * (ranks - 1); }
inline int ring_previous(int ranks, int rank) { return (rank + ranks - 1) % ranks; }

// What `rank` receives from its ring predecessor at `step` (0 <= step < ring_steps(ranks)).
RingStep ring_step(int ranks, int rank, int step);

// Segments and chunks of one ring allreduce of `count` elements.
class RingPlan {
public:
    // Each segment is cut into at most `max_chunks` chunks, none smaller than `min_chunk_elements`
    // (unless the segment itself is smaller).
    RingPlan(size_t count, int ranks, int max_chunks, size_t min_chunk_elements);

    static constexpr size_t kGranule = 4;  // 4 floats = one 16-byte vector load

    int ranks() const { return ranks_; }
    int chunks_per_segment() const { return chunks_per_segment_; }
    size_t largest_segment() const { return segment(0).size(); }
    ElementRange segment(int index) const;
    // Chunk `chunk` of segment `segment_index`, in whole-buffer element indices; may be empty.
    ElementRange chunk(int segment_index, int chunk) const;

private:
    size_t count_;
    int ranks_;
    size_t chunk_elements_;
    int chunks_per_segment_;
};

}  // namespace fwi
