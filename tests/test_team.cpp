// ThreadTeam (common/team.hpp): the barrier, gather and model comparison the skeleton's loop uses, with
// plain threads (no GPU).
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <string>
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

TEST_CASE("the set-up barrier waits longer for member 0 in proportion to the others' own set-up, and no longer") {
    // Member 0 builds its share in 1.6 s, more than the 1 s timeout. Member 1's took 0.3 s: it allows
    // 3 x 2 x 0.3 + 1 = 2.8 s and passes. Had its own taken 0.02 s, it allows 1.12 s and gives up (and
    // member 0 ends within the timeout after that, so run_threads joins it). Half a second or more to
    // spare each way, for a loaded machine.
    for (const double own_setup : {0.3, 0.02}) {
        ThreadTeam team(2, 1.0);
        const auto run = [&] {
            team.run_threads([&](int m) {
                if (m == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1600));
                team.wait_for_member0_setup(m, m == 0 ? 1.6 : own_setup);
            });
        };
        if (own_setup == 0.3)
            CHECK_NOTHROW(run());
        else
            CHECK_THROWS_WITH_AS(run(), doctest::Contains("waiting for every GPU's set-up"), EnvironmentError);
    }
    CHECK(member0_allowance(0, 4, 10.0) == 0.0);  // member 0 comes last: the timeout alone
    CHECK(member0_allowance(3, 4, 10.0) == 120.0);
}

TEST_CASE("a member that passed the barrier passes, even when the last one to arrive fails right after") {
    // Member 1 arrives last, which releases member 0, and fails at once. Member 0 may wake only after the
    // team is broken; it passed all the same, and must not be told that another thread failed first.
    constexpr int kTrials = 300;
    int told_failed = 0;
    for (int trial = 0; trial < kTrials; ++trial) {
        ThreadTeam team(2, 10.0);
        std::atomic<bool> passed{false};
        CHECK_THROWS_WITH_AS(team.run_threads([&](int m) {
            if (m == 1) std::this_thread::sleep_for(std::chrono::microseconds(200));
            team.barrier(m, "the round");
            if (m == 1) throw EnvironmentError("member 1 failed after the barrier");
            passed = true;
        }),
                             "member 1 failed after the barrier", EnvironmentError);
        told_failed += !passed;
    }
    CHECK(told_failed == 0);
}

TEST_CASE("a member stuck after another failed ends the process with the error, its timeout later") {
    // Stands for a thread stuck in a CUDA call, which no timeout of its own ends: run_threads would join
    // it forever. It ends the process instead (std::_Exit), so the test runs it in a child process.
    int errors[2];
    REQUIRE(pipe(errors) == 0);
    const auto started = std::chrono::steady_clock::now();
    const pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        dup2(errors[1], STDERR_FILENO);
        try {
            ThreadTeam team(2, 0.5);
            team.run_threads([](int m) {
                if (m == 0) throw EnvironmentError("member 0 failed");
                std::this_thread::sleep_for(std::chrono::seconds(30));
            });
        } catch (...) {  // joined after all: the child must not go on to run the other tests
        }
        std::_Exit(99);  // not reached when run_threads ends the process
    }
    close(errors[1]);
    std::string text;
    char buffer[512];
    for (ssize_t n; (n = read(errors[0], buffer, sizeof buffer)) > 0;) text.append(buffer, size_t(n));
    close(errors[0]);
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == kExitEnvironment);
    CHECK(seconds < 10.0);
    CHECK(text.find("environment: member 0 failed") != std::string::npos);
    CHECK(text.find("1 of the GPUs' threads had not finished 0.5 s (--timeout) after that error") != std::string::npos);
}
