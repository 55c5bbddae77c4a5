// Fault injection for the fault tests (flag --test-fault, left out of --help on purpose): one rank fails
// at a chosen point, and the tests check that every other rank still ends, non-zero, within --timeout,
// with a message naming the operation it waited for. --test-fault=KIND-before-POINT:R makes rank R fail
// there:
//   KIND   exit     exit at once (status 1) without a word to the others
//          sigkill  kill itself with SIGKILL (what the OOM killer does)
//          stall    stop answering (sleep), never reaching the point
//   POINT  allreduce  just before the first timed allreduce (with --bench-allreduce: the first timed
//                     batch of the sweep)
//          bootstrap  just before the NCCL bootstrap (the others wait in MPI, not yet in NCCL)
#pragma once

#include <string>

namespace fwi {

inline constexpr const char* kFaultFlag = "--test-fault";

enum class FaultKind { none, exit, sigkill, stall };
enum class FaultPoint { allreduce, bootstrap };

struct TestFault {
    FaultKind kind = FaultKind::none;
    FaultPoint point = FaultPoint::allreduce;
    int rank = -1;
};

// "" gives no fault; anything that is not KIND-before-POINT:R throws UsageError naming --test-fault.
TestFault parse_test_fault(const std::string& spec);

// On the fault's rank, at the fault's point: the fault (exit and sigkill do not return; stall sleeps
// 10 x timeout_s, then exits).
void trigger_test_fault(const TestFault& fault, FaultPoint point, int rank, double timeout_s);

}  // namespace fwi
