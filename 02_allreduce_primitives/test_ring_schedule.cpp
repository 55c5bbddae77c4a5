// The ring allreduce's schedule (which chunk every rank receives and reduces at every step), checked
// by running it on the host exactly as the GPU ring does, for 1..8 ranks and awkward sizes.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "allreduce_sweep.hpp"
#include "ring_schedule.hpp"

using namespace fwi;

namespace {

const std::vector<size_t> kCounts{0, 1, 2, 3, 5, 7, 8, 17, 63, 100, 1001, 4099, 65537};

// Runs the ring allreduce on host vectors the way ring.cu does on GPUs: at each step every rank pulls
// a chunk from its predecessor (input buffer at step 0, result buffer after) and either adds its own
// input (reduce-scatter) or stores it (all-gather). Ranks of one step run concurrently on GPUs, so
// each step reads a snapshot taken before it. Returns the result buffer of every rank.
std::vector<std::vector<float>> simulate_ring(int ranks, size_t count, const RingPlan& plan) {
    std::vector<std::vector<float>> send(ranks, std::vector<float>(count));
    std::vector<std::vector<float>> recv(ranks, std::vector<float>(count, std::numeric_limits<float>::quiet_NaN()));
    for (int rank = 0; rank < ranks; ++rank)
        for (size_t i = 0; i < count; ++i) send[rank][i] = allreduce_input(rank, i);
    if (ranks == 1) recv = send;  // no steps: the sum of one buffer is itself
    for (int step = 0; step < ring_steps(ranks); ++step) {
        const auto before = recv;
        for (int chunk = 0; chunk < plan.chunks_per_segment(); ++chunk)
            for (int rank = 0; rank < ranks; ++rank) {
                const int sender = ring_previous(ranks, rank);
                const RingStep what = ring_step(ranks, rank, step);
                const ElementRange range = plan.chunk(what.segment, chunk);
                const auto& source = what.from_send_buffer ? send[sender] : before[sender];
                for (size_t i = range.begin; i < range.end; ++i)
                    recv[rank][i] = what.phase == RingPhase::ReduceScatter ? send[rank][i] + source[i] : source[i];
            }
    }
    return recv;
}

}  // namespace

TEST_CASE("split_evenly covers the buffer with aligned, balanced, disjoint ranges") {
    for (int parts = 1; parts <= 8; ++parts)
        for (size_t count : kCounts) {
            size_t next = 0, largest = 0, smallest = count;
            for (int index = 0; index < parts; ++index) {
                const ElementRange range = split_evenly(count, parts, index, 4);
                CHECK(range.begin == next);
                if (!range.empty()) CHECK(range.begin % 4 == 0);
                next = range.end;
                largest = std::max(largest, range.size());
                smallest = std::min(smallest, range.size());
            }
            CHECK(next == count);
            CHECK(largest - smallest < 2 * 4);  // whole granules differ by one; the last may be partial
            CHECK(largest == split_evenly(count, parts, 0, 4).size());  // the first is never smaller
        }
}

TEST_CASE("ring steps: what a rank receives at step k it sends at step k+1") {
    for (int ranks = 1; ranks <= 8; ++ranks) {
        CHECK(ring_steps(ranks) == 2 * (ranks - 1));
        for (int rank = 0; rank < ranks; ++rank) {
            const int sender = ring_previous(ranks, rank);
            for (int step = 0; step < ring_steps(ranks); ++step) {
                const RingStep mine = ring_step(ranks, rank, step);
                CHECK(mine.phase == (step < ranks - 1 ? RingPhase::ReduceScatter : RingPhase::AllGather));
                CHECK(mine.from_send_buffer == (step == 0));
                if (step > 0) CHECK(mine.segment == ring_step(ranks, sender, step - 1).segment);
                // A rank never writes the segment its successor is reading in the same step.
                CHECK(mine.segment != ring_step(ranks, (rank + 1) % ranks, step).segment);
            }
            // After the reduce-scatter, rank r holds the full sum of segment r+1 and sends it first.
            if (ranks > 1) CHECK(ring_step(ranks, rank, ranks - 2).segment == (rank + 1) % ranks);
        }
    }
}

TEST_CASE("ring plan: chunks tile each segment, aligned, no more than asked, none too small") {
    for (int ranks = 1; ranks <= 8; ++ranks)
        for (size_t count : kCounts)
            for (int max_chunks : {1, 3, 4, 16})
                for (size_t min_chunk : {size_t(1), size_t(4), size_t(64)}) {
                    const RingPlan plan(count, ranks, max_chunks, min_chunk);
                    CHECK(plan.chunks_per_segment() >= 1);
                    CHECK(plan.chunks_per_segment() <= max_chunks);
                    for (int segment = 0; segment < ranks; ++segment) {
                        const ElementRange whole = plan.segment(segment);
                        size_t next = whole.begin;
                        for (int chunk = 0; chunk < plan.chunks_per_segment(); ++chunk) {
                            const ElementRange part = plan.chunk(segment, chunk);
                            if (part.empty()) continue;
                            CHECK(part.begin == next);
                            CHECK(part.begin % 4 == 0);
                            if (part.end != whole.end) CHECK(part.size() >= min_chunk);
                            next = part.end;
                        }
                        CHECK(next == whole.end);
                    }
                }
}

TEST_CASE("the ring schedule, run on the host, gives every rank the exact sum") {
    for (int ranks = 1; ranks <= 8; ++ranks)
        for (size_t count : kCounts)
            for (int max_chunks : {1, 3, 4})
                for (size_t min_chunk : {size_t(4), size_t(64)}) {
                    CAPTURE(ranks);
                    CAPTURE(count);
                    CAPTURE(max_chunks);
                    const auto result = simulate_ring(ranks, count, RingPlan(count, ranks, max_chunks, min_chunk));
                    long long wrong = 0;
                    for (int rank = 0; rank < ranks; ++rank)
                        for (size_t i = 0; i < count; ++i) wrong += result[rank][i] != allreduce_expected_sum(ranks, i);
                    CHECK(wrong == 0);
                }
}
