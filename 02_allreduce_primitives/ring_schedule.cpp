#include "ring_schedule.hpp"

#include <algorithm>

namespace fwi {

ElementRange split_evenly(size_t count, int parts, int index, size_t granule) {
    const size_t granules = (count + granule - 1) / granule;
    const size_t base = granules / parts, extra = granules % parts;
    const size_t index_u = static_cast<size_t>(index);
    const size_t first_granule = index_u * base + std::min(index_u, extra);
    const size_t granules_here = base + (index_u < extra ? 1 : 0);
    const size_t begin = std::min(count, first_granule * granule);
    return {begin, std::min(count, begin + granules_here * granule)};
}

RingStep ring_step(int ranks, int rank, int step) {
    const int reduce_scatter_steps = ranks - 1;
    if (step < reduce_scatter_steps)
        return {RingPhase::ReduceScatter, ((rank - step - 1) % ranks + ranks) % ranks, step == 0};
    const int gather_step = step - reduce_scatter_steps;
    return {RingPhase::AllGather, ((rank - gather_step) % ranks + ranks) % ranks, false};
}

RingPlan::RingPlan(size_t count, int ranks, int max_chunks, size_t min_chunk_elements) : count_(count), ranks_(ranks) {
    const size_t segment_size = largest_segment();
    const size_t wanted = (segment_size + max_chunks - 1) / max_chunks;
    const size_t at_least = std::max(wanted, min_chunk_elements);
    chunk_elements_ = std::max(kGranule, (at_least + kGranule - 1) / kGranule * kGranule);
    chunks_per_segment_ = std::max<int>(1, static_cast<int>((segment_size + chunk_elements_ - 1) / chunk_elements_));
}

ElementRange RingPlan::segment(int index) const { return split_evenly(count_, ranks_, index, kGranule); }

ElementRange RingPlan::chunk(int segment_index, int chunk) const {
    const ElementRange whole = segment(segment_index);
    const size_t begin = std::min(whole.end, whole.begin + chunk * chunk_elements_);
    return {begin, std::min(whole.end, begin + chunk_elements_)};
}

}  // namespace fwi
