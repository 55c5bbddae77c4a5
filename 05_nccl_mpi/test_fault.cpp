#include "test_fault.hpp"

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "errors.hpp"

namespace fwi {

namespace {

const char* kFaultFlag = "--test-fault";

struct FaultName {
    FaultKind kind;
    const char* name;
};
constexpr FaultName kFaultNames[] = {{FaultKind::exit, "exit-before-allreduce"},
                                     {FaultKind::sigkill, "sigkill-before-allreduce"},
                                     {FaultKind::stall, "stall-before-allreduce"}};

[[noreturn]] void refuse(const std::string& spec) {
    std::string kinds;
    for (const auto& fault : kFaultNames) kinds += (kinds.empty() ? "" : "|") + std::string(fault.name);
    throw UsageError(std::string(kFaultFlag) + ": '" + spec + "' is not KIND:RANK with KIND one of " + kinds +
                     " and RANK 0 or more");
}

}  // namespace

TestFault parse_test_fault(const std::string& spec) {
    if (spec.empty()) return {};
    const size_t colon = spec.rfind(':');
    if (colon == std::string::npos) refuse(spec);
    const std::string name = spec.substr(0, colon), rank = spec.substr(colon + 1);
    if (rank.empty() || rank.size() > 6 || rank.find_first_not_of("0123456789") != std::string::npos) refuse(spec);
    for (const auto& fault : kFaultNames)
        if (name == fault.name) return {fault.kind, std::stoi(rank)};
    refuse(spec);
}

std::string take_flag_value(std::vector<std::string>& args, const std::string& flag) {
    // The rules of the ArgParser that gets the rest: nothing after --help counts, a flag given twice is
    // refused, the next argument is no value when it is itself a flag ("--test-fault --nz 64" forgot the
    // value), and an empty value is refused.
    std::string value;
    bool taken = false;
    for (size_t i = 0; i < args.size();) {
        if (args[i] == "--help" || args[i] == "-h") break;
        const bool joined = args[i].rfind(flag + "=", 0) == 0;
        if (!joined && args[i] != flag) {
            ++i;
            continue;
        }
        if (taken) throw UsageError(flag + " given twice");
        taken = true;
        if (joined) {
            value = args[i].substr(flag.size() + 1);
            args.erase(args.begin() + i);
            continue;
        }
        if (i + 1 >= args.size() || args[i + 1].rfind("--", 0) == 0 || args[i + 1] == "-h")
            throw UsageError(flag + ": missing value");
        value = args[i + 1];
        args.erase(args.begin() + i, args.begin() + i + 2);
    }
    if (taken && value.empty()) throw UsageError(flag + ": needs a non-empty value");
    return value;
}

void trigger_test_fault(const TestFault& fault, int rank, double timeout_s) {
    if (fault.kind == FaultKind::none || fault.rank != rank) return;
    for (const auto& known : kFaultNames)
        if (known.kind == fault.kind)
            std::fprintf(stderr, "rank %d: %s=%s:%d: failing on purpose\n", rank, kFaultFlag, known.name, rank);
    std::fflush(stderr);
    std::fflush(stdout);
    switch (fault.kind) {
        case FaultKind::exit:
            std::_Exit(1);
        case FaultKind::sigkill:
            std::raise(SIGKILL);
            break;
        case FaultKind::stall:
            std::this_thread::sleep_for(std::chrono::duration<double>(10.0 * timeout_s));
            std::_Exit(1);
        case FaultKind::none:
            break;
    }
}

}  // namespace fwi
