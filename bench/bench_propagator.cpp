// Google Benchmark cases for the propagator (the method: docs/PERFORMANCE.md, its introduction), in the
// order they run:
//   Gradient          the default problem's full gradient (8 shots, forward + adjoint, nt 2000), one per
//                     repetition (30): the median and mean of single gradients, peak device memory, and the
//                     forward pass alone without the history;
//   GradientBatches   the same gradient for 1, 2, 4 and 8 shots, 5 times each: the median of each (Tn_ms, and
//                     of its forward and adjoint time loops, Tn_forward_ms and Tn_adjoint_ms) and the
//                     ratios T(2)/T(8) and T(4)/T(8). On 4 and 2 GPUs each GPU computes 2 and 4 of the 8
//                     shots, so 1 / ratio is the most those GPU counts can gain on the default problem;
//   CopyBandwidth     device-to-device copy, bytes read + written: the memory ceiling;
//   ForwardStep       one shot on a large grid: cells per second and the fraction of the roofline
//                     (copy bandwidth / 16 B per cell: read two wavefields and the model, write one);
//   GradientSustained the default gradient 150 times back to back: the mean a long run sees, with the
//                     median and the slowest.
// CUDA events time every case (manual time); the cases with repetitions report their median and mean.
// Gradient, GradientSustained and GradientBatches (its batch of every shot) check, untimed, that their last
// gradient is the first one computed, bit for bit: a case that timed a wrong result fails (exit 3) instead
// of reporting it.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <map>
#include <memory>
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

// Frees the gradient cases' shared propagator (below): the other cases call it first, so that a GPU with
// little memory has room for them, and GradientSustained builds it again.
void release_gradient_setup();

// The copy that measures the memory ceiling: 1 GiB, or a quarter of the free memory on a GPU with less than
// 4 GiB free (still far larger than any L2 cache).
size_t copy_bytes() {
    size_t free_bytes = 0, total_bytes = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    return std::min(size_t(1) << 30, free_bytes / 4);
}

// The ceiling ForwardStep's roofline divides by: the median of CopyBandwidth's last repetition where it
// ran, else measured once when first asked.
double& copy_bandwidth_storage() {
    static double bytes_per_second = 0.0;
    return bytes_per_second;
}

double copy_bandwidth() {
    double& measured = copy_bandwidth_storage();
    if (measured == 0.0) measured = measure_copy_bandwidth(copy_bytes());
    return measured;
}

void CopyBandwidth(benchmark::State& state) {
    if (skip_without_gpu(state)) return;
    release_gradient_setup();
    const size_t bytes = copy_bytes();
    std::vector<double> bandwidths;
    for (auto _ : state) {
        bandwidths.push_back(measure_copy_bandwidth(bytes));
        state.SetIterationTime(2.0 * double(bytes) / bandwidths.back());
    }
    copy_bandwidth_storage() = median(bandwidths);
    state.counters["GB/s"] = copy_bandwidth() / 1e9;
}

void ForwardStep(benchmark::State& state) {
    if (skip_without_gpu(state)) return;
    release_gradient_setup();
    Problem p = problem_preset("default");
    p.name = "square";
    p.nz = p.nx = static_cast<int>(state.range(0));
    p.nt = 101;
    p.nshots = 1;
    p.interface_depth = 8;  // within reach of 101 steps: validate() refuses a recording that holds no reflection
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

// The gradient cases share one propagator, built by the first of them to run and kept, as a program builds
// one and keeps it: building it (17 GiB of history on the default problem, the graphs of its time loops)
// takes about a second. CopyBandwidth and ForwardStep free it, and GradientSustained builds it again.
struct GradientSetup {
    Problem problem = problem_preset("default");
    std::vector<int> shots = all_shots(problem.nshots);
    GpuPropagator gpu{problem, true_model(problem)};
    double forward_no_history_seconds = 0.0;
    double first_misfit = 0.0;  // of the warm-up gradient, which every timed one must equal bit for bit
    std::vector<float> first_gradient;

    GradientSetup() {
        gpu.set_observed(gpu.forward(shots));  // also the warm-up of the forward pass alone
        // The same forward pass without storing the history: the difference from the gradient's forward
        // pass is what writing the history costs (docs/PERFORMANCE.md, "the history's floor"). Its small
        // workspace is replaced by the gradient's below.
        gpu.forward(shots);
        forward_no_history_seconds = gpu.last_forward_loop_seconds();
        gpu.set_velocity(initial_model(problem));
        first_misfit = gpu.gradient(shots).misfit;  // warm-up: the gradient's workspace and graphs
        first_gradient = gpu.download_gradient();
    }

    // What a timed case checks after its gradients of every shot, untimed: the last equals the warm-up's,
    // bit for bit (the propagator gives the same bits every time) and finite, so that a case never reports
    // the time of a wrong result.
    void check_last_gradient(benchmark::State& state, double last_misfit) const {
        if (!std::isfinite(last_misfit) || last_misfit != first_misfit || gpu.download_gradient() != first_gradient)
            fail_benchmark_case(state,
                                "the last gradient or misfit differs from the first one computed, which the "
                                "propagator makes the same bits every time");
    }
};

std::unique_ptr<GradientSetup>& gradient_setup_storage() {
    static std::unique_ptr<GradientSetup> setup;
    return setup;
}

void release_gradient_setup() { gradient_setup_storage().reset(); }

// The shared setup, or null after telling Google Benchmark why this case is skipped (no GPU). On a GPU
// whose memory cannot hold the gradient of one shot, making it throws DeviceMemoryError (skip_on_error).
GradientSetup* gradient_setup(benchmark::State& state) {
    if (skip_without_gpu(state)) return nullptr;
    std::unique_ptr<GradientSetup>& setup = gradient_setup_storage();
    if (!setup) setup = std::make_unique<GradientSetup>();
    return setup.get();
}

// One gradient per repetition: the repetitions give the median and the mean of single gradients.
void Gradient(benchmark::State& state) {
    GradientSetup* const setup = gradient_setup(state);
    if (!setup) return;
    GradientResult last;
    for (auto _ : state) {
        last = setup->gpu.gradient(setup->shots);
        state.SetIterationTime(last.device_seconds);
    }
    setup->check_last_gradient(state, last.misfit);
    state.counters["forward_ms"] = 1e3 * last.forward_seconds;
    state.counters["adjoint_ms"] = 1e3 * last.adjoint_seconds;
    state.counters["forward_no_history_ms"] = 1e3 * setup->forward_no_history_seconds;
    state.counters["batch"] = setup->gpu.gradient_batch_size();
    state.counters["adjoint_batch"] = setup->gpu.adjoint_group_size();
    state.counters["peak_GiB"] = gib(setup->gpu.peak_allocated_bytes());
}

void GradientBatches(benchmark::State& state) {
    GradientSetup* const setup = gradient_setup(state);
    if (!setup) return;
    const std::vector<int> batches{1, 2, 4, 8};
    const auto first_shots = [&](int n) { return std::vector<int>(setup->shots.begin(), setup->shots.begin() + n); };
    // Warm-up: each batch's own graphs (the workspace, sized for all 8 shots, is kept).
    for (const int n : batches) setup->gpu.gradient(first_shots(n));
    std::map<int, std::vector<double>> seconds, forward_seconds, adjoint_seconds;
    double last_full_misfit = 0.0;
    for (auto _ : state) {
        double total = 0.0;
        for (const int n : batches) {
            const GradientResult g = setup->gpu.gradient(first_shots(n));
            last_full_misfit = g.misfit;
            seconds[n].push_back(g.device_seconds);
            forward_seconds[n].push_back(g.forward_seconds);
            adjoint_seconds[n].push_back(g.adjoint_seconds);
            total += g.device_seconds;
        }
        state.SetIterationTime(total);
    }
    for (const int n : batches) {
        const std::string name = "T" + std::to_string(n);
        state.counters[name + "_ms"] = 1e3 * median(seconds[n]);
        state.counters[name + "_forward_ms"] = 1e3 * median(forward_seconds[n]);
        state.counters[name + "_adjoint_ms"] = 1e3 * median(adjoint_seconds[n]);
    }
    state.counters["T2/T8"] = median(seconds[2]) / median(seconds[8]);
    state.counters["T4/T8"] = median(seconds[4]) / median(seconds[8]);
    // The last batch was every shot: the gradient the setup computed first, to the bit.
    setup->check_last_gradient(state, last_full_misfit);
}

// The same gradient back to back for several seconds, as a long inversion runs it. On an H200 this load
// reaches the GPU's power limit after a second or two, and the GPU then lowers its clock now and then
// (docs/PERFORMANCE.md): the time reported is the mean over the run, with its median and slowest gradient.
void GradientSustained(benchmark::State& state) {
    GradientSetup* const setup = gradient_setup(state);
    if (!setup) return;
    std::vector<double> seconds;
    double last_misfit = 0.0;
    for (auto _ : state) {
        const GradientResult g = setup->gpu.gradient(setup->shots);
        seconds.push_back(g.device_seconds);
        last_misfit = g.misfit;
        state.SetIterationTime(seconds.back());
    }
    setup->check_last_gradient(state, last_misfit);
    state.counters["median_ms"] = 1e3 * median(seconds);
    state.counters["slowest_ms"] = 1e3 * *std::max_element(seconds.begin(), seconds.end());
}

// Runs a case; an error skips the case with its message rather than ending the process with every result
// before it unwritten. A GPU whose memory cannot hold what the case needs is no failure: that case is
// only left out.
template <void (*run_case)(benchmark::State&)>
void skip_on_error(benchmark::State& state) {
    try {
        run_case(state);
    } catch (const DeviceMemoryError& e) {
        state.SkipWithError(e.what());
    } catch (const std::exception& e) {
        fail_benchmark_case(state, e.what());
    }
}

}  // namespace

// Each case under its own name, run by skip_on_error; the sustained case last: it leaves the GPU at its
// power limit.
BENCHMARK(skip_on_error<Gradient>)
    ->Name("Gradient")
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->Repetitions(30)
    ->ReportAggregatesOnly();
// One repetition of 5 iterations: the medians over them are computed inside, per batch size.
BENCHMARK(skip_on_error<GradientBatches>)
    ->Name("GradientBatches")
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(5);
BENCHMARK(skip_on_error<CopyBandwidth>)
    ->Name("CopyBandwidth")
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Repetitions(3)
    ->ReportAggregatesOnly();
BENCHMARK(skip_on_error<ForwardStep>)
    ->Name("ForwardStep")
    ->Arg(8192)
    ->Arg(2048)
    ->Arg(512)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Repetitions(5)
    ->ReportAggregatesOnly();
BENCHMARK(skip_on_error<GradientSustained>)
    ->Name("GradientSustained")
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(150);

int main(int argc, char** argv) {
    const char* cases = "Gradient, GradientBatches, CopyBandwidth, ForwardStep/<n> or GradientSustained";
    const int status = run_benchmarks("bench_propagator", cases, argc, argv);
    release_gradient_setup();  // before the CUDA runtime shuts down
    return status;
}
