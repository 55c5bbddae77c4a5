// Fault injection for the fault tests (flag --test-fault, left out of --help on purpose): one rank fails
// just before the first timed allreduce, and the tests check that every other rank still ends, non-zero,
// within --timeout, with a message naming the operation it waited for. FWI runs only: main refuses it with
// --bench-allreduce.
//   --test-fault=exit-before-allreduce:R     rank R exits at once (status 1) without a word to the others
//   --test-fault=sigkill-before-allreduce:R  rank R kills itself with SIGKILL (what the OOM killer does)
//   --test-fault=stall-before-allreduce:R    rank R stops answering (sleeps) and never calls the allreduce
#pragma once

#include <string>
#include <vector>

namespace fwi {

enum class FaultKind { none, exit, sigkill, stall };

struct TestFault {
    FaultKind kind = FaultKind::none;
    int rank = -1;
};

// "" gives no fault; anything that is not KIND:RANK throws UsageError naming --test-fault.
TestFault parse_test_fault(const std::string& spec);

// Removes `flag VALUE` or `flag=VALUE` from args and returns VALUE ("" when the flag is absent), so the
// remaining arguments go to the ArgParser, which does not know the flag.
std::string take_flag_value(std::vector<std::string>& args, const std::string& flag);

// On the fault's rank: the fault (exit and sigkill do not return; stall sleeps 10 x timeout_s, then exits).
void trigger_test_fault(const TestFault& fault, int rank, double timeout_s);

}  // namespace fwi
