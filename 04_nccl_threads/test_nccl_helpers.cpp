// The parts of the NCCL helpers (common/nccl_comm.hpp) and of the shot-parallel code that run without a
// GPU: the timeout logic of their waits (common/polling.hpp) on a fake clock, the failure messages, the
// NCCL version string (the library answers without a GPU), the settings that take the time limit away,
// the --transport flag of 05 and 06, and the
// split of the shots over GPUs.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "cli.hpp"
#include "errors.hpp"
#include "nccl_check.hpp"
#include "nccl_comm.hpp"
#include "run_env.hpp"
#include "shot_parallel.hpp"

using namespace fwi;

namespace {

// A clock that advances only when the wait pauses, by `step` seconds.
struct FakeClock {
    double now = 100.0, step = 0.5;
    int pauses = 0;
    std::function<double()> reader() {
        return [this] { return now; };
    }
    std::function<void()> pause() {
        return [this] {
            now += step;
            ++pauses;
        };
    }
};

// A poll that reports pending `pending_polls` times, then `final_status`.
std::function<PollStatus()> poll_sequence(int pending_polls, PollStatus final_status, int& polls) {
    return [=, &polls] { return polls++ < pending_polls ? PollStatus::pending : final_status; };
}

}  // namespace

TEST_CASE("a wait that completes in time returns done, polling between pauses") {
    FakeClock clock;
    int polls = 0;
    CHECK(poll_until_done(poll_sequence(3, PollStatus::done, polls), 10.0, clock.reader(), clock.pause()) ==
          WaitOutcome::done);
    CHECK(polls == 4);
    CHECK(clock.pauses == 3);
}

TEST_CASE("a wait that is done at once never pauses") {
    FakeClock clock;
    int polls = 0;
    CHECK(poll_until_done(poll_sequence(0, PollStatus::done, polls), 10.0, clock.reader(), clock.pause()) ==
          WaitOutcome::done);
    CHECK(clock.pauses == 0);
}

TEST_CASE("an error ends the wait at once, before the timeout") {
    FakeClock clock;
    int polls = 0;
    CHECK(poll_until_done(poll_sequence(2, PollStatus::failed, polls), 10.0, clock.reader(), clock.pause()) ==
          WaitOutcome::failed);
    CHECK(clock.now == doctest::Approx(101.0));
}

TEST_CASE("a wait that never completes times out after the timeout, not before") {
    FakeClock clock;
    int polls = 0;
    CHECK(poll_until_done(poll_sequence(1000000, PollStatus::done, polls), 10.0, clock.reader(), clock.pause()) ==
          WaitOutcome::timed_out);
    CHECK(clock.now == doctest::Approx(110.0));  // 20 pauses of 0.5 s
    CHECK(polls == 21);                          // the poll at 10 s is still made
}

TEST_CASE("a completion on the last poll before the timeout still counts") {
    FakeClock clock;
    int polls = 0;
    CHECK(poll_until_done(poll_sequence(20, PollStatus::done, polls), 10.0, clock.reader(), clock.pause()) ==
          WaitOutcome::done);
}

TEST_CASE("a clock without stops leaves out the steps longer than the longest a wait's polls take") {
    std::vector<double> readings{100.0, 100.1, 100.2, 160.2, 160.3};  // stopped for 60 s after 100.2
    size_t next = 0;
    const auto clock = clock_without_stops([&] { return readings[next++]; }, 1.0);
    CHECK(clock() == doctest::Approx(0.1));
    CHECK(clock() == doctest::Approx(0.2));
    CHECK(clock() == doctest::Approx(1.2));  // the 60 s step counts as 1 s
    CHECK(clock() == doctest::Approx(1.3));
}

TEST_CASE("ranks are described in one or several") {
    CHECK(describe_ranks({1}, 4) == "rank 1 of 4");
    CHECK(describe_ranks({0, 1, 2, 3}, 4) == "ranks 0, 1, 2, 3 of 4");
    CHECK(describe_ranks({-1}, 0) == "rank ? of ?");
}

TEST_CASE("a timeout message names the operation, the ranks, the timeout and what was done") {
    const std::string message =
        nccl_wait_failure_message("ncclAllReduce of the gradient", {0}, 2, WaitOutcome::timed_out, 10.0, "");
    CHECK(message.find("ncclAllReduce of the gradient on rank 0 of 2") == 0);
    CHECK(message.find("not finished after 10 s (--timeout)") != std::string::npos);
    CHECK(message.find("aborted the communicator") != std::string::npos);
    CHECK(message.find("Hint: another rank has probably died") != std::string::npos);
}

TEST_CASE("a creation between processes that all started it blames the connections when it times out") {
    const std::string message = nccl_wait_failure_message("NCCL communicator creation", {1}, 2, WaitOutcome::timed_out,
                                                          10.0, "", kNcclConnectHint);
    CHECK(message.find("not finished after 10 s (--timeout); aborted the communicator. Hint: every rank had "
                       "started it") != std::string::npos);
    CHECK(message.find("NCCL_SOCKET_IFNAME") != std::string::npos);
    CHECK(message.find("another rank has probably died") == std::string::npos);
    // A failure keeps NCCL's own text and its hint: the connection hint is for a timeout only.
    CHECK(nccl_wait_failure_message("NCCL communicator creation", {1}, 2, WaitOutcome::failed, 10.0, "remote error",
                                    kNcclConnectHint)
              .find("Hint: a peer rank or its GPU failed") != std::string::npos);
}

TEST_CASE("a failure message carries NCCL's error") {
    const std::string message = nccl_wait_failure_message("NCCL communicator creation", {0, 1}, 2, WaitOutcome::failed,
                                                          60.0, "remote process exited");
    CHECK(message.find("NCCL communicator creation on ranks 0, 1 of 2: failed: remote process exited") == 0);
    CHECK(message.find("aborted the communicators") != std::string::npos);
}

TEST_CASE(
    "a call that may leave collectives queued passes success and in-progress on, and turns an error into "
    "an EnvironmentError with NCCL's text") {
    CHECK(nccl_check_or_abort(ncclSuccess, {}, "ncclAllReduce of 4 bytes") == ncclSuccess);
    CHECK(nccl_check_or_abort(ncclInProgress, {}, "ncclAllReduce of 4 bytes") == ncclInProgress);
    try {
        nccl_check_or_abort(ncclRemoteError, {}, "ncclAllReduce of 4 bytes");  // no communicator to abort
        FAIL("no error");
    } catch (const EnvironmentError& error) {
        const std::string message = error.what();
        CHECK(message.find("ncclAllReduce of 4 bytes on ") == 0);
        CHECK(message.find(std::string("failed: ") + ncclGetErrorString(ncclRemoteError)) != std::string::npos);
        CHECK(message.find("Hint: a peer rank or its GPU failed") != std::string::npos);
    }
}

namespace {
// Sets an environment variable for the tests below, or unsets it (nullptr).
void with(const char* name, const char* value) {
    if (value)
        setenv(name, value, 1);
    else
        unsetenv(name);
}
}  // namespace

TEST_CASE("the NCCL settings that take the time limit away are named, and only those") {
    for (const char* name : {"NCCL_COMM_BLOCKING", "NCCL_RUNTIME_CONNECT", "NCCL_LAUNCH_MODE"}) with(name, nullptr);
    CHECK(nccl_settings_without_time_limit().empty());
    with("NCCL_COMM_BLOCKING", "0");
    with("NCCL_RUNTIME_CONNECT", "00");  // NCCL reads integers: 00 is 0
    with("NCCL_LAUNCH_MODE", "PARALLEL");
    CHECK(nccl_settings_without_time_limit().empty());
    with("NCCL_COMM_BLOCKING", "0x1");
    with("NCCL_RUNTIME_CONNECT", "1");
    with("NCCL_LAUNCH_MODE", "group");
    const std::vector<std::string> settings = nccl_settings_without_time_limit();
    REQUIRE(settings.size() == 3);
    CHECK(settings[0].find("NCCL_COMM_BLOCKING=0x1") == 0);
    CHECK(settings[1].find("NCCL_RUNTIME_CONNECT=1") == 0);
    CHECK(settings[2].find("NCCL_LAUNCH_MODE=group") == 0);
    for (const std::string& setting : settings)
        CHECK(setting.find("--timeout cannot interrupt it") != std::string::npos);
    for (const char* name : {"NCCL_COMM_BLOCKING", "NCCL_RUNTIME_CONNECT", "NCCL_LAUNCH_MODE"}) with(name, nullptr);
}

TEST_CASE("an NCCL setting left empty or out of range is NCCL's default, and prepare_nccl sets an empty one") {
    for (const char* name : {"NCCL_COMM_BLOCKING", "NCCL_RUNTIME_CONNECT", "NCCL_LAUNCH_MODE"}) with(name, nullptr);
    // NCCL reads "" as unset: RUNTIME_CONNECT's default connects at the first collective, COMM_BLOCKING's
    // leaves the communicator non-blocking; a number out of range is its default too.
    with("NCCL_RUNTIME_CONNECT", "");
    with("NCCL_COMM_BLOCKING", "99999999999999999999");
    std::vector<std::string> settings = nccl_settings_without_time_limit();
    REQUIRE(settings.size() == 1);
    CHECK(settings[0].find("NCCL_RUNTIME_CONNECT= ") == 0);
    with("NCCL_RUNTIME_CONNECT", "99999999999999999999");
    with("NCCL_COMM_BLOCKING", "");
    settings = nccl_settings_without_time_limit();
    REQUIRE(settings.size() == 1);
    CHECK(settings[0].find("NCCL_RUNTIME_CONNECT=99999999999999999999") == 0);
    // prepare_nccl keeps a value the user chose, and sets an empty one as it sets an unset one.
    with("NCCL_RUNTIME_CONNECT", "");
    with("NCCL_NVLS_ENABLE", "");
    prepare_nccl();
    CHECK(std::string(std::getenv("NCCL_RUNTIME_CONNECT")) == "0");
    CHECK(std::string(std::getenv("NCCL_NVLS_ENABLE")) == "0");
    with("NCCL_NVLS_ENABLE", "2");
    prepare_nccl();
    CHECK(std::string(std::getenv("NCCL_NVLS_ENABLE")) == "2");
    CHECK(nccl_settings_without_time_limit().empty());
    // A value is shown escaped: a newline in it would start a line of its own.
    with("NCCL_COMM_BLOCKING", "1\nfake line");
    settings = nccl_settings_without_time_limit();
    REQUIRE(settings.size() == 1);
    CHECK(settings[0].find("NCCL_COMM_BLOCKING=1\\x0afake line makes") == 0);
    for (const char* name : {"NCCL_COMM_BLOCKING", "NCCL_RUNTIME_CONNECT", "NCCL_LAUNCH_MODE", "NCCL_NVLS_ENABLE"})
        with(name, nullptr);
}

TEST_CASE("a call that fails inside nccl_group closes the group, so this thread's next NCCL calls are its own") {
    // A call with no communicator fails at once, with no GPU; NCCL's answer to a group end outside any group
    // shows whether the failed group was closed.
    float value = 0.0f;
    CHECK_THROWS_AS(
        nccl_group({}, "a test's allreduce",
                   [&] { NCCL_CHECK(ncclAllReduce(&value, &value, 1, ncclFloat, ncclSum, nullptr, nullptr)); }),
        EnvironmentError);
    CHECK(ncclGroupEnd() == ncclInvalidUsage);
    // Another exception inside the group closes it too.
    CHECK_THROWS_AS(nccl_group({}, "a test's calls", [] { throw EnvironmentError("a CUDA call failed"); }),
                    EnvironmentError);
    CHECK(ncclGroupEnd() == ncclInvalidUsage);
    // An empty group is fine.
    CHECK(nccl_group({}, "nothing", [] {}) == ncclSuccess);
    CHECK(ncclGroupEnd() == ncclInvalidUsage);
}

TEST_CASE("the NCCL version string reads like NCCL 2.x.y") {
    const std::string version = nccl_version_string();
    CHECK(version.rfind("NCCL 2.", 0) == 0);
    CHECK(std::count(version.begin(), version.end(), '.') == 2);
}

TEST_CASE("--transport network turns NCCL's peer and shared-memory transports off, and the RESULT's env shows it") {
    unsetenv("NCCL_P2P_DISABLE");
    unsetenv("NCCL_SHM_DISABLE");
    std::string transport = "auto";
    ArgParser parser("test", "");
    add_nccl_transport_flag(parser, transport);
    const char* auto_argv[] = {"test"};
    REQUIRE(parser.parse(1, auto_argv));
    CHECK(apply_nccl_transport(transport).rfind("transport: auto", 0) == 0);
    CHECK(std::getenv("NCCL_P2P_DISABLE") == nullptr);  // auto leaves NCCL's choice alone
    CHECK(std::getenv("NCCL_SHM_DISABLE") == nullptr);

    ArgParser network_parser("test", "");
    add_nccl_transport_flag(network_parser, transport);
    setenv("NCCL_P2P_DISABLE", "0", 1);  // an explicit --transport network wins over the environment
    const char* network_argv[] = {"test", "--transport", "network"};
    REQUIRE(network_parser.parse(3, network_argv));
    CHECK(
        apply_nccl_transport(transport) ==
        "transport: network (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1: what crossing nodes costs, measured on one host)");
    CHECK(std::string(std::getenv("NCCL_P2P_DISABLE")) == "1");
    CHECK(std::string(std::getenv("NCCL_SHM_DISABLE")) == "1");
    const std::string env = run_env_json().str();
    CHECK(env.find(R"("NCCL_P2P_DISABLE": "1")") != std::string::npos);
    CHECK(env.find(R"("NCCL_SHM_DISABLE": "1")") != std::string::npos);
    unsetenv("NCCL_P2P_DISABLE");
    unsetenv("NCCL_SHM_DISABLE");
}

TEST_CASE("--transport refuses anything but auto and network, naming the flag") {
    std::string transport = "auto";
    ArgParser parser("test", "");
    add_nccl_transport_flag(parser, transport);
    const char* argv[] = {"test", "--transport", "ib"};
    CHECK_THROWS_WITH_AS(parser.parse(3, argv), doctest::Contains("--transport: 'ib' is not one of auto|network"),
                         UsageError);
}

TEST_CASE("the shots split over GPUs evenly and unevenly, every shot once, in order") {
    const std::vector<ShotRange> even = split_all_shots(8, 4);
    REQUIRE(even.size() == 4);
    for (int g = 0; g < 4; ++g) {
        CHECK(even[g].first == 2 * g);
        CHECK(even[g].count == 2);
    }
    const std::vector<ShotRange> uneven = split_all_shots(8, 3);  // 3, 3, 2
    CHECK(uneven[0].shots() == std::vector<int>{0, 1, 2});
    CHECK(uneven[1].shots() == std::vector<int>{3, 4, 5});
    CHECK(uneven[2].shots() == std::vector<int>{6, 7});
    const std::vector<ShotRange> one = split_all_shots(4, 1);
    CHECK(one[0].shots() == std::vector<int>{0, 1, 2, 3});
}

TEST_CASE("more GPUs than shots is refused before any GPU is touched") {
    CHECK_THROWS_WITH_AS(split_all_shots(3, 4), doctest::Contains("--nshots: 3 shots cannot keep 4 GPUs busy"),
                         UsageError);
}
