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

TEST_CASE("more ranks than shots is refused with a message naming the flag") {
    CHECK_THROWS_WITH_AS(split_shots(2, 3, 0), doctest::Contains("--nshots: 2 shots cannot keep 3 ranks busy"),
                         UsageError);
    CHECK_THROWS_AS(split_shots(8, 3, 3), UsageError);
}
