// Google Benchmark cases for each allreduce variant at a few sizes, on all visible GPUs (at most 8).
// Time per allreduce comes from CUDA events (manual time); counters give algbw and busbw in GB/s.
// Exit codes as the suite's (docs/ARCHITECTURE.md): 2 for an unknown flag or a --benchmark_filter that
// selects nothing, 3 when no GPU is visible (the flags are checked first) or a case failed or timed out.
#include <benchmark/benchmark.h>

#include <cuda_runtime.h>

#include <cstdio>
#include <map>
#include <memory>

#include "allreduce_sweep.hpp"
#include "allreduce_variant.hpp"
#include "bandwidth.hpp"
#include "benchmark_main.hpp"
#include "errors.hpp"
#include "gpu_group.hpp"

using namespace fwi;

namespace {

constexpr size_t kLargestBytes = size_t(256) << 20;
constexpr int kIterationsPerSample = 10;

GpuGroup& shared_group() {
    static GpuGroup group(0, 30.0, PeerAccess::enable);
    static const bool reserved = (group.reserve(kLargestBytes / sizeof(float)), true);
    (void)reserved;
    return group;
}

// One variant object per name for the whole run (NCCL initialises its communicators once).
AllreduceVariant& shared_variant(const std::string& name) {
    GpuGroup& group = shared_group();  // constructed first, so destroyed after the variants
    static std::map<std::string, std::unique_ptr<AllreduceVariant>> variants;
    auto& variant = variants[name];
    if (!variant) variant = make_variant(name, group, VariantOptions{});
    return *variant;
}

void allreduce(benchmark::State& state, const std::string& name) {
    int gpus = 0;
    if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus == 0) {
        state.SkipWithError("no CUDA GPU");
        return;
    }
    // A case that timed out leaves its kernels on the GPUs: the next cases would queue behind them.
    if (gpu_work_abandoned()) {
        fail_benchmark_case(state, "an earlier case timed out and left the GPUs busy");
        return;
    }
    try {
        GpuGroup& group = shared_group();
        AllreduceVariant& variant = shared_variant(name);
        if (const std::string reason = variant.unavailable_reason(); !reason.empty()) {
            state.SkipWithError(reason.c_str());
            return;
        }
        const size_t bytes = static_cast<size_t>(state.range(0));
        const size_t count = bytes / sizeof(float);
        const int iters = batch_iterations(bytes, kIterationsPerSample);
        variant.setup(count);
        variant.run(count);  // warm-up, and the result checked: a wrong allreduce gets no bandwidth
        variant.wait();
        if (const long long wrong = variant.count_wrong(count); wrong > 0) {
            fail_benchmark_case(state,
                                (std::to_string(wrong) + " elements of the allreduce's result are wrong").c_str());
            return;
        }
        double seconds = 0.0;
        for (auto _ : state) {
            variant.begin_batch();
            for (int i = 0; i < iters; ++i) variant.run(count);
            const double per_allreduce = variant.end_batch() / iters;
            state.SetIterationTime(per_allreduce);
            seconds += per_allreduce;
        }
        const double mean = seconds / static_cast<double>(state.iterations());
        state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(bytes));
        state.counters["gpus"] = group.size();
        state.counters["algbw_GBps"] = algorithm_bandwidth(bytes, mean) / 1e9;
        state.counters["busbw_GBps"] = bus_bandwidth(bytes, mean, group.size()) / 1e9;
    } catch (const DeviceMemoryError& e) {  // a GPU too small for the largest case: not a failure
        state.SkipWithError(e.what());
    } catch (const std::exception& e) {
        fail_benchmark_case(state, e.what());
    }
}

}  // namespace

int main(int argc, char** argv) {
    // 8 KiB (latency), the FWI gradient (384x512 floats), 16 MiB, 256 MiB (bandwidth).
    for (const std::string& name : variant_names())
        benchmark::RegisterBenchmark(("allreduce/" + name).c_str(), allreduce, name)
            ->Arg(8 << 10)
            ->Arg(384 * 512 * 4)
            ->Arg(16 << 20)
            ->Arg(256 << 20)
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond);
    // A case that timed out failed, and so did every case after it (exit 3); its kernels may still be on
    // the GPUs, and finish_program ends the process without waiting for them.
    return finish_program(run_benchmarks("bench_allreduce", "allreduce/<variant>/<bytes>", argc, argv));
}
