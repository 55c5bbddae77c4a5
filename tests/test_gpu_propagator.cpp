// GPU propagator against the CPU reference, and batched shots against one shot at a time and against
// other batch sizes; the model update on the device against the host's.
#include <doctest/doctest.h>

#include <utility>
#include <vector>

#include "cpu_propagator.hpp"
#include "device_update.hpp"
#include "errors.hpp"
#include "gpu_propagator.hpp"
#include "gpu_resources.hpp"
#include "near_the_bottom.hpp"
#include "problem.hpp"
#include "update.hpp"
#include "verify.hpp"

using namespace fwi;

namespace {
Problem small_problem() {
    Problem p = problem_preset("small");
    validate(p);
    return p;
}
const std::vector<int> kAllShots = {0, 1, 2, 3};

// The GPU against the CPU reference on `shots` of p: traces in the true model (which `gpu` holds when
// called), then misfit and gradient from the initial model. Returns the GPU's gradient; `gpu` is left
// holding the initial model and the observed traces.
std::vector<float> check_against_cpu(const Problem& p, const std::vector<int>& shots, GpuPropagator& gpu) {
    const std::vector<float> observed = CpuPropagator<float>(p, true_model(p)).model_all_shots();
    const std::vector<float> gpu_observed = gpu.observed_traces_of(shots);
    const Difference traces = compare(gpu_observed, observed);
    std::vector<float> cpu_gradient;
    const double cpu_misfit = CpuPropagator<float>(p, initial_model(p)).misfit_gradient(shots, observed, cpu_gradient);
    gpu.set_velocity(initial_model(p));
    gpu.set_observed(gpu_observed);  // each side its own data, as in 01 --verify (verify_against_cpu.cpp)
    const GradientResult g = gpu.gradient(shots);
    std::vector<float> gpu_gradient = gpu.download_gradient();
    const Difference gradient = compare(gpu_gradient, cpu_gradient);
    MESSAGE("traces: " << describe(traces) << "; misfit GPU " << g.misfit << " CPU " << cpu_misfit
                       << "; gradient: " << describe(gradient));
    REQUIRE(gradient.ref_max_abs > 0.0);  // not a problem whose gradient is zero
    CHECK(traces.relative_l2 < 1e-4);     // float32 on both sides, FMA and summation order differ
    CHECK(g.misfit == doctest::Approx(cpu_misfit).epsilon(1e-4));
    // 01 --verify allows 1e-3 on any problem; these grids measured 2e-6 to 1.3e-5 (1 x H100), so a tenth of
    // it here catches a change that moves the gradient less than 01's check would notice.
    CHECK(gradient.relative_l2 < 1e-4);
    return gpu_gradient;
}
}  // namespace

TEST_CASE("GPU forward traces and gradient match the CPU reference on a small problem") {
    const Problem p = small_problem();
    GpuPropagator gpu(p, true_model(p));
    check_against_cpu(p, kAllShots, gpu);
}

// Grids the small problem does not cover: padded widths that are not a multiple of the inner kernel's 4
// columns, an odd number of time steps (the adjoint's imaging pairs end differently), and absorbing layers
// of the thinnest allowed (12) and of an odd width (13); each run twice, for the same bits.
TEST_CASE("the GPU matches the CPU on grids with ragged edges and thin layers") {
    struct Grid {
        int nz, nx, nt, absorb_width;
    };
    for (const Grid g :
         {Grid{150, 203, 300, 20}, Grid{61, 77, 301, Problem::kMinAbsorbWidth}, Grid{100, 130, 250, 13}}) {
        CAPTURE(g.nz);
        CAPTURE(g.nx);
        CAPTURE(g.absorb_width);
        Problem p = small_problem();
        p.nz = g.nz;
        p.nx = g.nx;
        p.nt = g.nt;
        p.absorb_width = g.absorb_width;
        p.nshots = 2;
        p.src_x_first = 7;
        p.src_x_last = g.nx - 9;
        p.nrec = g.nx / 3;
        p.rec_x_last = g.nx - 1;
        p.interface_depth = 30;  // shallow enough that the reflection arrives within nt
        p.rec_depth = 25;
        validate(p);
        const std::vector<int> shots = {0, 1};
        GpuPropagator gpu(p, true_model(p));
        const std::vector<float> first = check_against_cpu(p, shots, gpu);
        gpu.gradient(shots);
        CHECK(compare(gpu.download_gradient(), first).max_abs == 0.0);  // the same bits every time
    }
}

// The bottom of the absorbing layer (its rows, its band of memory variables, the far side of each index)
// does its share only where the waves reach it: with the sources and receivers near the bottom.
TEST_CASE("the GPU matches the CPU with the sources and receivers near the bottom") {
    const Problem p = near_the_bottom(small_problem());
    GpuPropagator gpu(p, true_model(p));
    check_against_cpu(p, kAllShots, gpu);
}

TEST_CASE("batched shots give the same result as one shot at a time") {
    const Problem p = small_problem();
    GpuPropagator gpu(p, true_model(p));
    const std::vector<float> batched = gpu.forward(kAllShots);
    std::vector<float> one_by_one;
    for (int shot : kAllShots) {
        const std::vector<float> traces = gpu.forward({shot});
        one_by_one.insert(one_by_one.end(), traces.begin(), traces.end());
    }
    // Same kernels, same arithmetic per shot: the traces agree bit for bit.
    CHECK(compare(batched, one_by_one).max_abs == 0.0);

    gpu.set_observed(batched);
    gpu.set_velocity(initial_model(p));
    gpu.set_batch_sizes(p.nshots, p.nshots);  // all together, whatever this GPU's L2 cache would choose
    REQUIRE(gpu.gradient_batch_size() == p.nshots);
    const GradientResult all = gpu.gradient(kAllShots);
    const std::vector<float> all_gradient = gpu.download_gradient();
    std::vector<float> summed(all_gradient.size(), 0.0f);
    double misfit = 0.0;
    for (int shot : kAllShots) {
        const GradientResult one = gpu.gradient({shot});
        const std::vector<float> one_gradient = gpu.download_gradient();
        misfit += one.misfit;
        for (size_t i = 0; i < summed.size(); ++i) summed[i] += one_gradient[i];
    }
    const Difference d = compare(all_gradient, summed);
    MESSAGE("batched vs one at a time: " << describe(d));
    CHECK(all.misfit == doctest::Approx(misfit).epsilon(1e-6));
    CHECK(d.relative_l2 < 1e-6);  // only the order of the sum over shots differs
}

TEST_CASE("the adjoint pass in groups of shots, and smaller forward batches, give the same gradient") {
    const Problem p = small_problem();
    GpuPropagator gpu(p, true_model(p));
    gpu.set_observed(gpu.forward(kAllShots));
    gpu.set_velocity(initial_model(p));
    gpu.set_batch_sizes(p.nshots, p.nshots);  // all together, whatever this GPU's L2 cache would choose
    REQUIRE(gpu.gradient_batch_size() == p.nshots);
    REQUIRE(gpu.adjoint_group_size() == p.nshots);
    const GradientResult together = gpu.gradient(kAllShots);
    const std::vector<float> together_gradient = gpu.download_gradient();
    // (forward batch, adjoint group): 4 shots then 2 groups of 2, then 4 groups of 1, then 2 batches of 2
    // with one group each and with 2 groups of 1.
    for (const auto& [forward, adjoint] : std::vector<std::pair<int, int>>{{4, 3}, {4, 1}, {2, 2}, {2, 1}}) {
        CAPTURE(forward);
        CAPTURE(adjoint);
        gpu.set_batch_sizes(forward, adjoint);
        const GradientResult grouped = gpu.gradient(kAllShots);
        CHECK(grouped.misfit == doctest::Approx(together.misfit).epsilon(1e-6));
        const Difference d = compare(gpu.download_gradient(), together_gradient);
        MESSAGE("forward " << forward << ", adjoint " << adjoint << " at a time: " << describe(d));
        CHECK(d.relative_l2 < 1e-6);  // only the order of the sum over shots differs
    }
}

TEST_CASE("a gradient that cannot fit in device memory is refused before anything runs") {
    Problem p = problem_preset("default");
    p.nz = p.nx = 4096;  // one shot's history: 20000 steps of 4136 x 4160 floats, about 1.3 TB
    p.nt = 20000;
    p.src_x_last = p.rec_x_last = 4000;
    validate(p);
    GpuPropagator gpu(p, initial_model(p));
    CHECK(gpu.gradient_batch_size() == 0);
    CHECK_THROWS_AS(gpu.require_gradient_fits(), EnvironmentError);
    CHECK_THROWS_WITH_AS(gpu.gradient({0}), doctest::Contains("GiB of device memory for one shot"), EnvironmentError);
}

TEST_CASE("a gradient whose observed traces cannot fit beside one shot is refused before anything runs") {
    Problem p = problem_preset("default");
    p.nz = 64;  // one shot's history: 2000 steps of a 104 x 16424-cell grid, about 14 GB
    p.nx = 16384;
    p.src_x_last = p.rec_x_last = p.nx - 1;
    p.nshots = 16000;  // the observed traces: 16000 x 2000 x 16384 floats, about 2 TB
    p.nrec = 16384;
    validate(p);
    GpuPropagator gpu(p, initial_model(p));
    CHECK(gpu.gradient_batch_size() == 0);
    CHECK_THROWS_WITH_AS(gpu.require_gradient_fits(), doctest::Contains("1953.1 GiB for the observed traces"),
                         EnvironmentError);
}

TEST_CASE("the model update on the device matches the host's, and is the same bits every time") {
    const Problem p = small_problem();
    GpuPropagator gpu(p, true_model(p));
    gpu.set_observed(gpu.forward(kAllShots));
    gpu.set_velocity(initial_model(p));
    gpu.gradient(kAllShots);
    const std::vector<float> gradient = gpu.download_gradient();

    std::vector<float> on_host = initial_model(p);
    update_model(p, gradient, on_host);
    DeviceModelUpdate update(p);
    DeviceBuffer<float> velocity(p.model_cells());
    std::vector<std::vector<float>> on_device;
    for (int repeat = 0; repeat < 3; ++repeat) {
        velocity.upload(initial_model(p), nullptr);
        update.apply(gpu.device_gradient(), velocity.data(), nullptr);
        on_device.push_back(velocity.download(p.model_cells(), nullptr));
    }
    const Difference d = compare(on_device[0], on_host);
    MESSAGE("device update vs host update: " << describe(d));
    CHECK(compare(on_host, initial_model(p)).max_abs == doctest::Approx(p.step_size).epsilon(1e-3));
    CHECK(d.relative_l2 < 1e-6);  // the same arithmetic, up to a fused multiply-add
    CHECK(compare(on_device[1], on_device[0]).max_abs == 0.0);
    CHECK(compare(on_device[2], on_device[0]).max_abs == 0.0);
    // Each call finds its own gradient's largest value: half the gradient takes the same step (the update is
    // scaled by the largest), where the largest value left from the calls before would halve it.
    std::vector<float> half = gradient;
    for (float& value : half) value *= 0.5f;
    DeviceBuffer<float> half_gradient(p.model_cells());
    half_gradient.upload(half, nullptr);
    velocity.upload(initial_model(p), nullptr);
    update.apply(half_gradient.data(), velocity.data(), nullptr);
    CHECK(compare(velocity.download(p.model_cells(), nullptr), on_host).relative_l2 < 1e-6);
}

// Takes most of the GPU's free memory, as other processes (or other ranks on this GPU) can after a
// propagator chose its batches. Runs alone (the "serial" suite: its own CTest test, RUN_SERIAL).
TEST_SUITE("serial") {
    TEST_CASE("a gradient whose memory was taken after its batches were chosen runs in smaller batches") {
        // A shot's gradient large enough (about 0.5 GiB) that the memory kept for other uses (5% and 256 MiB)
        // leaves room for 2 shots in 3 shots' worth of memory.
        Problem p = small_problem();
        p.nt = 5000;
        validate(p);
        GpuPropagator gpu(p, true_model(p));
        gpu.set_observed(gpu.forward(kAllShots));
        gpu.set_velocity(initial_model(p));
        gpu.set_batch_sizes(p.nshots, p.nshots);
        gpu.gradient(kAllShots);
        const std::vector<float> together = gpu.download_gradient();

        gpu.forward({0});  // replaces the gradient's workspace, so the next gradient allocates its own again
        size_t free_bytes = 0, total_bytes = 0;
        CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
        // Room for the gradient of 3 shots: not 4 at a time, and 2 with what is kept for other uses. (The forward
        // workspace is freed before the gradient's is allocated, and adds to the room.)
        const size_t room = 3 * gpu.gradient_bytes_per_shot();
        REQUIRE(free_bytes > room);
        DeviceBuffer<char> taken(free_bytes - room);
        gpu.gradient(kAllShots);
        CHECK(gpu.gradient_batch_size() == 2);
        const Difference d = compare(gpu.download_gradient(), together);
        MESSAGE("2 at a time after the memory was taken, against 4: " << describe(d));
        CHECK(d.relative_l2 < 1e-6);  // only the order of the sum over shots differs
    }
}
