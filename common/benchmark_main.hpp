// BENCHMARK_MAIN with the suite's exit codes (docs/ARCHITECTURE.md), for the Google Benchmark programs
// (bench/bench_propagator, 02's bench_allreduce): 2 for an unknown flag or a --benchmark_filter that
// selects nothing, 3 when no GPU is visible (the flags are checked first). Header-only: only programs
// that link Google Benchmark include it.
#pragma once

#include <benchmark/benchmark.h>

#include <cstdio>
#include <string>
#include <vector>

#include "device.hpp"
#include "errors.hpp"

namespace fwi {

// Runs the registered benchmarks; `program` and `cases` (what the filter may match, for the message)
// name them in the refusals.
inline int run_benchmarks(const char* program, const char* cases, int argc, char** argv) {
    // Reports nothing: without a GPU the selected cases are run only to count them (each skips at once).
    class SilentReporter : public benchmark::BenchmarkReporter {
    public:
        bool ReportContext(const Context&) override { return true; }
        void ReportRuns(const std::vector<Run>&) override {}
    };
    const auto selects_nothing = [&] {
        std::fprintf(stderr, "%s: --benchmark_filter '%s' selects no benchmark; allowed a regex matching %s\n", program,
                     benchmark::GetBenchmarkFilter().c_str(), cases);
        return kExitBadInput;
    };
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return kExitBadInput;
    if (visible_gpu_count() == 0) {
        SilentReporter silent;
        if (benchmark::RunSpecifiedBenchmarks(&silent) == 0) return selects_nothing();
        std::fprintf(stderr, "%s: environment: no CUDA GPU visible (check nvidia-smi and CUDA_VISIBLE_DEVICES)\n",
                     program);
        return kExitEnvironment;
    }
    const size_t ran = benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return ran == 0 ? selects_nothing() : kExitOk;
}

}  // namespace fwi
