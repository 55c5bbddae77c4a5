// ThreadTeam (common/team.hpp): the barrier, gather and model comparison the skeleton's loop uses, with
// plain threads (no GPU).
#include <doctest/doctest.h>

#include <atomic>
#include <cmath>
#include <thread>
#include <vector>

#include "errors.hpp"
#include "team.hpp"

using namespace fwi;

namespace {

// Runs fn(member) on `members` threads and joins them.
template <typename Fn>
void on_threads(int members, Fn fn) {
    std::vector<std::thread> threads;
    for (int m = 0; m < members; ++m) threads.emplace_back(fn, m);
    for (auto& thread : threads) thread.join();
}

}  // namespace

TEST_CASE("no member passes the barrier before every member reached it, time after time") {
    constexpr int kMembers = 4, kRounds = 200;
    ThreadTeam team(kMembers, 10.0);
    std::atomic<int> arrived{0};
    std::atomic<bool> early{false};
    on_threads(kMembers, [&](int m) {
        for (int round = 1; round <= kRounds; ++round) {
            ++arrived;
            team.barrier(m, "round");
            if (arrived.load() < round * kMembers) early = true;
            team.barrier(m, "round end");  // nobody starts the next round while another still checks
        }
    });
    CHECK_FALSE(early.load());
}

TEST_CASE("gather gives member 0 every member's values in member order, the others nothing") {
    ThreadTeam team(3, 10.0);
    std::vector<std::vector<std::vector<double>>> received(3);
    on_threads(3, [&](int m) { received[m] = team.gather(m, {double(m), 10.0 * m}); });
    REQUIRE(received[0].size() == 3);
    for (int m = 0; m < 3; ++m) CHECK(received[0][m] == std::vector<double>{double(m), 10.0 * m});
    CHECK(received[1].empty());
    CHECK(received[2].empty());
}

TEST_CASE("same_on_all is true only when every model equals member 0's bit for bit") {
    ThreadTeam team(3, 10.0);
    for (const bool differ : {false, true}) {
        std::vector<int> answers(3);
        on_threads(3, [&](int m) {
            std::vector<float> model(100, 1500.0f);
            if (differ && m == 2) model[57] = std::nextafter(1500.0f, 2000.0f);  // one ulp
            answers[m] = team.same_on_all(m, model);
        });
        for (int answer : answers) CHECK(answer == (differ ? 0 : 1));
    }
}

TEST_CASE("a member that never comes ends the barrier with an EnvironmentError naming what it waited for") {
    ThreadTeam team(2, 0.2);
    CHECK_THROWS_WITH_AS(team.barrier(0, "the slowest GPU's gradient"),
                         doctest::Contains("timed out after 0.2 s waiting for the slowest GPU's gradient"),
                         EnvironmentError);
}
