// Google Benchmark cases for the propagator (docs/PERFORMANCE.md, "How the figures are measured"):
//   CopyBandwidth    device-to-device copy, bytes read + written: the memory ceiling;
//   ForwardStep      one shot on a large grid: cells per second and the fraction of the roofline
//                    (copy bandwidth / 16 B per cell: read two wavefields and the model, write one);
//   Gradient         the default problem's full gradient (8 shots, forward + adjoint, nt 2000), its
//                    peak device memory, and the forward pass alone without the history;
//   GradientBatches  the same gradient for 1, 2, 4 and 8 shots in one run, each time and the ratios
//                    T(2)/T(8) and T(4)/T(8): on 4 and 2 GPUs each GPU computes 2 and 4 of the 8 shots,
//                    so 1 / ratio is the most those GPU counts can gain on the default problem.
// Every case reports the median of its repetitions with manual (CUDA event) timing.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "benchmark_main.hpp"
#include "device.hpp"
#include "errors.hpp"
#include "gpu_propagator.hpp"
#include "problem.hpp"
#include "shot_split.hpp"
#include "timing.hpp"

using namespace fwi;

namespace {

constexpr double kBytesPerCell = 16.0;

bool skip_without_gpu(benchmark::State& state) {
    if (visible_gpu_count() > 0) return false;
    state.SkipWithError("no CUDA GPU visible");
    return true;
}

double copy_bandwidth() {
    static const double measured = measure_copy_bandwidth(size_t(1) << 30);
    return measured;
}

void CopyBandwidth(benchmark::State& state) {
    if (skip_without_gpu(state)) return;
    for (auto _ : state) {
        const double bandwidth = measure_copy_bandwidth(size_t(1) << 30);
        state.SetIterationTime(2.0 * double(size_t(1) << 30) / bandwidth);
    }
    state.counters["GB/s"] = copy_bandwidth() / 1e9;
}

void ForwardStep(benchmark::State& state) {
    if (skip_without_gpu(state)) return;
    Problem p = problem_preset("default");
    p.name = "square";
    p.nz = p.nx = static_cast<int>(state.range(0));
    p.nt = 101;
    p.nshots = 1;
    validate(p);
    GpuPropagator gpu(p, true_model(p));
    gpu.forward({0});  // warm-up: allocation and graph capture
    for (auto _ : state) {
        gpu.forward({0});
        state.SetIterationTime(gpu.last_forward_loop_seconds());
    }
    const double steps = p.nt - 1;
    const double cells_per_second = double(gpu.layout().padded_cells()) * steps / gpu.last_forward_loop_seconds();
    state.counters["Gcells/s"] = cells_per_second / 1e9;
    state.counters["roofline_Gcells/s"] = copy_bandwidth() / kBytesPerCell / 1e9;
    state.counters["roofline_fraction"] = cells_per_second / (copy_bandwidth() / kBytesPerCell);
}

void Gradient(benchmark::State& state) {
    if (skip_without_gpu(state)) return;
    const Problem p = problem_preset("default");
    const std::vector<int> shots = all_shots(p.nshots);
    GpuPropagator gpu(p, true_model(p));
    gpu.set_observed(gpu.forward(shots));
    gpu.set_velocity(initial_model(p));
    gpu.gradient(shots);  // warm-up
    GradientResult last;
    for (auto _ : state) {
        last = gpu.gradient(shots);
        state.SetIterationTime(last.device_seconds);
    }
    state.counters["forward_ms"] = 1e3 * last.forward_seconds;
    state.counters["adjoint_ms"] = 1e3 * last.adjoint_seconds;
    // The same forward pass without keeping the imaging terms: the difference is what writing the history
    // costs (docs/PERFORMANCE.md, "the history's floor").
    gpu.forward(shots);  // warm-up: a workspace and graph of its own
    gpu.forward(shots);
    state.counters["forward_no_history_ms"] = 1e3 * gpu.last_forward_loop_seconds();
    state.counters["batch"] = gpu.gradient_batch_size();
    state.counters["adjoint_batch"] = gpu.adjoint_batch_size();
    state.counters["peak_GiB"] = gib(gpu.peak_allocated_bytes());
}

void GradientBatches(benchmark::State& state) {
    if (skip_without_gpu(state)) return;
    const Problem p = problem_preset("default");
    const std::vector<int> all = all_shots(p.nshots);
    const std::vector<int> batches{1, 2, 4, 8};
    GpuPropagator gpu(p, true_model(p));
    gpu.set_observed(gpu.forward(all));
    gpu.set_velocity(initial_model(p));
    // Warm-up, the largest batch first so that the workspace is sized once (a propagator whose memory is
    // freed and allocated again runs slower: docs/PERFORMANCE.md), then each batch's own graphs.
    gpu.gradient(all);
    for (const int n : batches) gpu.gradient(std::vector<int>(all.begin(), all.begin() + n));
    std::map<int, std::vector<double>> seconds;
    for (auto _ : state) {
        double total = 0.0;
        for (const int n : batches) {
            const double t = gpu.gradient(std::vector<int>(all.begin(), all.begin() + n)).device_seconds;
            seconds[n].push_back(t);
            total += t;
        }
        state.SetIterationTime(total);
    }
    for (const int n : batches) state.counters["T" + std::to_string(n) + "_ms"] = 1e3 * median(seconds[n]);
    state.counters["T2/T8"] = median(seconds[2]) / median(seconds[8]);
    state.counters["T4/T8"] = median(seconds[4]) / median(seconds[8]);
}

}  // namespace

BENCHMARK(CopyBandwidth)->UseManualTime()->Unit(benchmark::kMillisecond)->Repetitions(3)->ReportAggregatesOnly();
BENCHMARK(ForwardStep)->Arg(8192)->Arg(2048)->Arg(512)->UseManualTime()->Unit(benchmark::kMillisecond)
    ->Repetitions(5)->ReportAggregatesOnly();
BENCHMARK(Gradient)->UseManualTime()->Unit(benchmark::kMillisecond)->Repetitions(5)->ReportAggregatesOnly();
// One repetition of 5 iterations: the medians over them are computed inside, per batch size.
BENCHMARK(GradientBatches)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(5);

int main(int argc, char** argv) {
    return run_benchmarks("bench_propagator", "CopyBandwidth, ForwardStep/<n>, Gradient or GradientBatches", argc,
                          argv);
}
