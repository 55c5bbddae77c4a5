// Shot split over ranks: contiguous, uneven counts spread over the first parts, every shot once.
#include <doctest/doctest.h>

#include "errors.hpp"
#include "shot_split.hpp"

using namespace fwi;

TEST_CASE("shots split into contiguous ranges that cover every shot once") {
    for (int nshots = 1; nshots <= 33; ++nshots)
        for (int parts = 1; parts <= nshots && parts <= 9; ++parts) {
            CAPTURE(nshots);
            CAPTURE(parts);
            int next = 0, smallest = nshots, largest = 0;
            for (int part = 0; part < parts; ++part) {
                const ShotRange r = split_shots(nshots, parts, part);
                CHECK(r.first == next);
                CHECK(r.count >= 1);
                next += r.count;
                smallest = std::min(smallest, r.count);
                largest = std::max(largest, r.count);
            }
            CHECK(next == nshots);
            CHECK(largest - smallest <= 1);
        }
}

TEST_CASE("8 shots on 3 ranks: 3, 3 and 2") {
    CHECK(split_shots(8, 3, 0).shots() == std::vector<int>{0, 1, 2});
    CHECK(split_shots(8, 3, 1).shots() == std::vector<int>{3, 4, 5});
    CHECK(split_shots(8, 3, 2).shots() == std::vector<int>{6, 7});
}

TEST_CASE("a share of the shots is printed as first..last") {
    CHECK(ShotRange{0, 3}.text() == "0..2");
    CHECK(ShotRange{6, 2}.text() == "6..7");
    CHECK(ShotRange{5, 1}.text() == "5..5");
}

TEST_CASE("more ranks than shots is refused with a message naming the flag") {
    CHECK_THROWS_WITH_AS(split_shots(2, 3, 0), doctest::Contains("--nshots: 2 shots cannot keep 3 ranks busy"),
                         UsageError);
    CHECK_THROWS_AS(split_shots(8, 3, 3), UsageError);
}

TEST_CASE("batches spread the shots evenly: at most 5 at a time, 8 shots are 4 + 4") {
    CHECK(even_batch(8, 5) == 4);
    CHECK(even_batch(8, 8) == 8);
    CHECK(even_batch(8, 3) == 3);  // 3 + 3 + 2
    CHECK(even_batch(7, 1) == 1);
    CHECK(even_batch(1, 6) == 1);
    CHECK(even_batch(0, 5) == 0);
    CHECK(even_batch(8, 0) == 0);
}

TEST_CASE("a GPU's batches: the forward's by memory and cache, the adjoint's within it") {
    // The default problem on an H100: the forward's working set fits 8 shots in its share of the L2, the
    // adjoint's 6, with memory for all: forward 8, adjoint 4 + 4.
    ShotBatches b = plan_shot_batches(8, 30, 8, 6);
    CHECK(b.gradient == 8);
    CHECK(b.adjoint_group == 4);
    // Memory for 5 shots: 4 + 4 forward; the adjoint takes each batch whole.
    b = plan_shot_batches(8, 5, 8, 6);
    CHECK(b.gradient == 4);
    CHECK(b.adjoint_group == 4);
    // Not one shot's working set fits the cache (a large grid, or a small L2): one shot at a time.
    b = plan_shot_batches(8, 30, 0, 0);
    CHECK(b.gradient == 1);
    CHECK(b.adjoint_group == 1);
    // Not one shot's gradient fits memory: no batch at all, which the caller refuses.
    b = plan_shot_batches(8, 0, 8, 6);
    CHECK(b.gradient == 0);
    CHECK(b.adjoint_group == 0);
}

TEST_CASE(
    "the largest share of the shots is batched as the plan for that many shots: what the model's compute(m) times") {
    // GpuPropagator plans from the problem's S shots, and a call with the largest share, m = ceil(S / N), batches
    // even_batch(m, gradient) and groups even_batch(batch, adjoint_most): the same as 01 --nshots m, whose plan
    // is for m (scripts/scaling_model.py takes its compute for the share's). E.g. a cache for 5 forward and 3
    // adjoint shots: 8 shots are 4 + 4, grouped 2 + 2; a share of 3 is grouped 3, not 2 + 1.
    const ShotBatches eight = plan_shot_batches(8, 100, 5, 3);
    CHECK(eight.gradient == 4);
    CHECK(eight.adjoint_group == 2);
    CHECK(even_batch(even_batch(3, eight.gradient), eight.adjoint_most) ==
          plan_shot_batches(3, 100, 5, 3).adjoint_group);
    int differing = 0;
    for (int shots = 1; shots <= 64; ++shots)
        for (int forward = 1; forward <= 11; ++forward)
            for (int adjoint = 1; adjoint <= 11; ++adjoint) {
                const ShotBatches all = plan_shot_batches(shots, 1000, forward, adjoint);
                for (int gpus = 1; gpus <= shots; ++gpus) {
                    const int share = (shots + gpus - 1) / gpus;
                    const ShotBatches alone = plan_shot_batches(share, 1000, forward, adjoint);
                    const int batch = even_batch(share, all.gradient);
                    differing += batch != alone.gradient || even_batch(batch, all.adjoint_most) != alone.adjoint_group;
                }
            }
    CHECK(differing == 0);
}
