// BENCHMARK_MAIN with the suite's exit codes (docs/ARCHITECTURE.md), for the Google Benchmark programs
// (bench/bench_propagator, 02's bench_allreduce): 2 for an unknown flag, a value Google Benchmark would
// abort on or ignore (see benchmark_flag_problem), or a --benchmark_filter that selects nothing, 3 when no
// GPU is visible (the flags are checked first). Header-only: only programs that link Google Benchmark
// include it.
#pragma once

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "device.hpp"
#include "errors.hpp"

namespace fwi {

// What is wrong with one of Google Benchmark's own flags, "" if nothing is: it aborts on a repetition
// count below 1, and prints its usage and exits 0 on an unknown format or time unit.
inline std::string benchmark_flag_problem(const std::string& arg) {
    const auto value_of = [&](const char* flag) -> const char* {
        const size_t n = std::strlen(flag);
        return arg.compare(0, n, flag) == 0 && arg.size() > n && arg[n] == '=' ? arg.c_str() + n + 1 : nullptr;
    };
    const auto one_of = [](const std::string& value, std::initializer_list<const char*> allowed) {
        return std::find(allowed.begin(), allowed.end(), value) != allowed.end();
    };
    if (const char* v = value_of("--benchmark_repetitions")) {
        char* end = nullptr;
        const long n = std::strtol(v, &end, 10);
        if (*v == '\0' || *end != '\0' || n < 1 || n > 1000000) return "a whole number from 1 to 1000000";
    }
    for (const char* flag : {"--benchmark_format", "--benchmark_out_format"})
        if (const char* v = value_of(flag))
            if (!one_of(v, {"console", "json", "csv"})) return "one of console|json|csv";
    if (const char* v = value_of("--benchmark_time_unit"))
        if (!one_of(v, {"ns", "us", "ms", "s"})) return "one of ns|us|ms|s";
    if (const char* v = value_of("--benchmark_min_time")) {
        char* end = nullptr;
        const double t = std::strtod(v, &end);
        const bool suffix_ok = *end == '\0' || ((*end == 's' || *end == 'x') && end[1] == '\0');
        if (end == v || !suffix_ok || !(t > 0.0) || t > 1e6)
            return "a positive number of seconds";
    }
    return "";
}

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
    for (int i = 1; i < argc; ++i) {
        const std::string problem = benchmark_flag_problem(argv[i]);
        if (problem.empty()) continue;
        std::fprintf(stderr, "%s: '%s': the value must be %s\n", program, argv[i], problem.c_str());
        return kExitBadInput;
    }
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
