#include "test_fault.hpp"

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "errors.hpp"

namespace fwi {

namespace {

struct KindName {
    FaultKind kind;
    const char* name;
};
constexpr KindName kKindNames[] = {
    {FaultKind::exit, "exit"}, {FaultKind::sigkill, "sigkill"}, {FaultKind::stall, "stall"}};

struct PointName {
    FaultPoint point;
    const char* name;
};
constexpr PointName kPointNames[] = {{FaultPoint::allreduce, "allreduce"}, {FaultPoint::bootstrap, "bootstrap"}};

[[noreturn]] void refuse(const std::string& spec) {
    std::string kinds, points;
    for (const auto& kind : kKindNames) kinds += (kinds.empty() ? "" : "|") + std::string(kind.name);
    for (const auto& point : kPointNames) points += (points.empty() ? "" : "|") + std::string(point.name);
    throw UsageError(std::string(kFaultFlag) + ": '" + shown_value(spec) +
                     "' is not KIND-before-POINT:RANK with KIND one of " + kinds + ", POINT one of " + points +
                     " and RANK 0 or more");
}

std::string name_of(const TestFault& fault) {
    std::string name;
    for (const auto& kind : kKindNames)
        if (kind.kind == fault.kind) name = kind.name;
    for (const auto& point : kPointNames)
        if (point.point == fault.point) name += std::string("-before-") + point.name;
    return name;
}

}  // namespace

TestFault parse_test_fault(const std::string& spec) {
    if (spec.empty()) return {};
    const size_t colon = spec.rfind(':');
    if (colon == std::string::npos) refuse(spec);
    const std::string name = spec.substr(0, colon), rank = spec.substr(colon + 1);
    if (rank.empty() || rank.size() > 6 || rank.find_first_not_of("0123456789") != std::string::npos) refuse(spec);
    for (const auto& kind : kKindNames)
        for (const auto& point : kPointNames) {
            const TestFault fault{kind.kind, point.point, std::stoi(rank)};
            if (name == name_of(fault)) return fault;
        }
    refuse(spec);
}

void trigger_test_fault(const TestFault& fault, FaultPoint point, int rank, double timeout_s) {
    if (fault.kind == FaultKind::none || fault.point != point || fault.rank != rank) return;
    std::fprintf(stderr, "rank %d: %s=%s:%d: failing on purpose\n", rank, kFaultFlag, name_of(fault).c_str(), rank);
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
