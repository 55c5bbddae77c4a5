// The parts of 05_nccl_mpi that run without a GPU: the --test-fault flag (parsed and taken out of the
// arguments) and the allreduce bench's check of a result (any order of float additions passes, a
// missing or doubled rank or a poisoned element fails).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "bench_values.hpp"
#include "errors.hpp"
#include "test_fault.hpp"

using namespace fwi;

TEST_CASE("no --test-fault means no fault") {
    const TestFault fault = parse_test_fault("");
    CHECK(fault.kind == FaultKind::none);
}

TEST_CASE("the three faults parse with their rank") {
    CHECK(parse_test_fault("exit-before-allreduce:1").kind == FaultKind::exit);
    CHECK(parse_test_fault("exit-before-allreduce:1").rank == 1);
    CHECK(parse_test_fault("sigkill-before-allreduce:0").kind == FaultKind::sigkill);
    CHECK(parse_test_fault("sigkill-before-allreduce:0").rank == 0);
    CHECK(parse_test_fault("stall-before-allreduce:12").kind == FaultKind::stall);
    CHECK(parse_test_fault("stall-before-allreduce:12").rank == 12);
}

TEST_CASE("a malformed fault is a usage error naming the flag") {
    for (const char* spec : {"bogus:1", "exit-before-allreduce", "exit-before-allreduce:", "exit-before-allreduce:-1",
                             "exit-before-allreduce:x", ":1"}) {
        CAPTURE(spec);
        CHECK_THROWS_WITH_AS(parse_test_fault(spec), doctest::Contains("--test-fault"), UsageError);
    }
}

TEST_CASE("the fault flag is taken out of the arguments, in both spellings") {
    std::vector<std::string> joined{"prog", "--problem", "small", "--test-fault=exit-before-allreduce:1", "--verbose"};
    CHECK(take_flag_value(joined, "--test-fault") == "exit-before-allreduce:1");
    CHECK(joined == std::vector<std::string>{"prog", "--problem", "small", "--verbose"});

    std::vector<std::string> separate{"prog", "--test-fault", "stall-before-allreduce:0", "--iterations", "2"};
    CHECK(take_flag_value(separate, "--test-fault") == "stall-before-allreduce:0");
    CHECK(separate == std::vector<std::string>{"prog", "--iterations", "2"});

    std::vector<std::string> absent{"prog", "--iterations", "2"};
    CHECK(take_flag_value(absent, "--test-fault").empty());
    CHECK(absent.size() == 3);

    std::vector<std::string> missing{"prog", "--test-fault"};
    CHECK_THROWS_AS(take_flag_value(missing, "--test-fault"), UsageError);
}

namespace {

// The bench's inputs of `ranks` ranks at `index`, added in float in the given rank order.
float float_sum(int ranks, size_t index, bool reverse) {
    float sum = 0.0f;
    for (int k = 0; k < ranks; ++k) sum += bench_input(reverse ? ranks - 1 - k : k, index);
    return sum;
}

}  // namespace

TEST_CASE("a float sum of the bench's inputs passes the check in any order") {
    for (int ranks : {1, 2, 3, 4, 8, 16})
        for (size_t index : {size_t(0), size_t(1), size_t(999), size_t(123457), size_t(1) << 26}) {
            CAPTURE(ranks);
            CAPTURE(index);
            CHECK(bench_result_ok(float_sum(ranks, index, false), ranks, index));
            CHECK(bench_result_ok(float_sum(ranks, index, true), ranks, index));
        }
}

TEST_CASE("a missing rank, a doubled rank or a poisoned element fails the check") {
    const size_t index = 4242;
    const float all = float_sum(4, index, false);
    CHECK_FALSE(bench_result_ok(all - bench_input(0, index), 4, index));
    CHECK_FALSE(bench_result_ok(all + bench_input(3, index), 4, index));
    CHECK_FALSE(bench_result_ok(std::nanf(""), 4, index));
}
