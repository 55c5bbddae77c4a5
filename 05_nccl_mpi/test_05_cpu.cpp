// The part of 05_nccl_mpi that runs without a GPU: the --test-fault flag (parsed and taken out of the
// arguments). The bench's sweep and its check are tested with 02 (test_allreduce_sweep.cpp).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "errors.hpp"
#include "test_fault.hpp"

using namespace fwi;

TEST_CASE("no --test-fault means no fault") {
    const TestFault fault = parse_test_fault("");
    CHECK(fault.kind == FaultKind::none);
}

TEST_CASE("the three faults parse with their point and rank") {
    CHECK(parse_test_fault("exit-before-allreduce:1").kind == FaultKind::exit);
    CHECK(parse_test_fault("exit-before-allreduce:1").point == FaultPoint::allreduce);
    CHECK(parse_test_fault("exit-before-allreduce:1").rank == 1);
    CHECK(parse_test_fault("sigkill-before-allreduce:0").kind == FaultKind::sigkill);
    CHECK(parse_test_fault("sigkill-before-allreduce:0").rank == 0);
    CHECK(parse_test_fault("stall-before-allreduce:12").kind == FaultKind::stall);
    CHECK(parse_test_fault("stall-before-allreduce:12").rank == 12);
    CHECK(parse_test_fault("stall-before-bootstrap:1").kind == FaultKind::stall);
    CHECK(parse_test_fault("stall-before-bootstrap:1").point == FaultPoint::bootstrap);
    CHECK(parse_test_fault("exit-before-bootstrap:0").point == FaultPoint::bootstrap);
}

TEST_CASE("a malformed fault is a usage error naming the flag") {
    for (const char* spec :
         {"bogus:1", "exit-before-allreduce", "exit-before-allreduce:", "exit-before-allreduce:-1",
          "exit-before-allreduce:x", ":1", "exit:1", "exit-before-:1", "-before-allreduce:1", "exit-before-update:1"}) {
        CAPTURE(spec);
        CHECK_THROWS_WITH_AS(parse_test_fault(spec), doctest::Contains("--test-fault"), UsageError);
    }
}
