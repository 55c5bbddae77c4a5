// 01_single_gpu: full-waveform inversion on one GPU, the baseline every other lesson is measured against.
//
// What you learn: the FWI loop itself. Model the observed data in the true model, then repeat: compute
// the misfit and its gradient for all shots (forward pass, residuals, adjoint pass, imaging condition),
// and update the model. Everything here is a call into common/; the later lessons keep this loop and
// change only how the shots are spread over GPUs and how their gradients are combined.
//
// What you should see: the misfit falling a little each iteration, the time per gradient (about 74 ms
// for the default problem on an H100), and a RESULT line. --verify instead compares the GPU propagator
// with the CPU reference on a small problem.
#include <cstdio>
#include <string>
#include <vector>

#include "cpu_propagator.hpp"
#include "device.hpp"
#include "errors.hpp"
#include "gpu_propagator.hpp"
#include "nvtx.hpp"
#include "output.hpp"
#include "problem.hpp"
#include "shot_split.hpp"
#include "timing.hpp"
#include "update.hpp"
#include "verify.hpp"

using namespace fwi;

namespace {

struct Options {
    int iterations = 5;
    std::string out = "out/01_single_gpu";
    std::string json;
    bool verify = false;
};

// GPU against CPU reference: traces of every shot, then misfit and gradient from the initial model.
// Tolerances: float32 on both sides, summed in different orders (FMA on the GPU) over nt steps.
int verify_against_cpu(const Problem& p, const std::string& json_path) {
    constexpr double kTraceTolerance = 1e-4, kGradientTolerance = 1e-3;
    std::printf("verify: %s on GPU and on the CPU reference (float32 both)\n", p.summary().c_str());
    const std::vector<int> shots = all_shots(p.nshots);
    const CpuPropagator<float> cpu_true(p, true_model(p));
    const std::vector<float> observed = cpu_true.model_all_shots();
    GpuPropagator gpu(p, true_model(p));
    const Difference traces = compare(gpu.forward(shots), observed);
    std::printf("  traces:   %s\n", describe(traces).c_str());

    std::vector<float> cpu_gradient;
    const double cpu_misfit = CpuPropagator<float>(p, initial_model(p)).misfit_gradient(shots, observed, cpu_gradient);
    gpu.set_velocity(initial_model(p));
    gpu.set_observed(observed);
    const GradientResult g = gpu.gradient(shots);
    const Difference gradient = compare(g.gradient, cpu_gradient);
    const double misfit_diff = std::abs(g.misfit - cpu_misfit) / cpu_misfit;
    std::printf("  misfit:   GPU %.6e, CPU %.6e, rel diff %.1e\n", g.misfit, cpu_misfit, misfit_diff);
    std::printf("  gradient: %s\n", describe(gradient).c_str());

    const bool ok = traces.relative_l2 < kTraceTolerance && gradient.relative_l2 < kGradientTolerance &&
                    misfit_diff < kTraceTolerance;
    JsonObject result;
    result.add("pattern", "01_single_gpu_verify")
        .add("problem", p.name)
        .add("grid", std::to_string(p.nz) + "x" + std::to_string(p.nx))
        .add("traces_rel_l2", traces.relative_l2)
        .add("gradient_rel_l2", gradient.relative_l2)
        .add("misfit_rel_diff", misfit_diff)
        .add("verified", ok);
    emit_result(result, json_path);
    if (!ok)
        throw VerificationError("GPU differs from the CPU reference beyond rel L2 " + std::to_string(kTraceTolerance) +
                                " (traces, misfit) / " + std::to_string(kGradientTolerance) + " (gradient)");
    std::printf("verify: PASSED (tolerances: traces and misfit %.0e, gradient %.0e)\n", kTraceTolerance,
                kGradientTolerance);
    return kExitOk;
}

void write_arrays(const Problem& p, const std::string& dir, const char* name, const std::vector<float>& model) {
    write_npy(dir + "/" + name + ".npy", model.data(), {size_t(p.nz), size_t(p.nx)});
}

int run_fwi(const Problem& p, const Options& options) {
    require_gpus(1);
    int device = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    std::printf("01_single_gpu: %s on %s\n", p.summary().c_str(), describe_device(device).c_str());
    const std::vector<int> shots = all_shots(p.nshots);
    const std::vector<float> v_true = true_model(p);
    std::vector<float> velocity = initial_model(p);

    GpuPropagator gpu(p, v_true);
    std::printf("memory: %s\n", gpu.memory_report().c_str());
    gpu.require_gradient_fits();  // refuse now, not after modelling the observed data
    const std::vector<float> observed = gpu.forward(shots);
    gpu.set_observed(observed);
    gpu.set_velocity(velocity);
    gpu.gradient(shots);  // warm-up: builds the CUDA graphs; not timed

    std::vector<double> misfits, gradient_seconds, iteration_seconds;
    std::vector<float> first_gradient;
    HostTimer total;
    for (int it = 0; it < options.iterations; ++it) {
        HostTimer iteration;
        const GradientResult g = gpu.gradient(shots);
        if (it == 0) first_gradient = g.gradient;
        {
            NvtxRange range("update");
            update_model(p, g.gradient, velocity);
            gpu.set_velocity(velocity);
        }
        misfits.push_back(g.misfit);
        gradient_seconds.push_back(g.device_seconds);
        iteration_seconds.push_back(iteration.seconds());
        const double eta = median(iteration_seconds) * (options.iterations - it - 1);
        const double relative = misfits.front() > 0.0 ? g.misfit / misfits.front() : 1.0;
        std::printf("iteration %3d/%d  misfit %.6e (%.4f of first)  gradient %7.2f ms  iteration %7.2f ms  ETA %.1f s\n",
                    it + 1, options.iterations, g.misfit, relative, 1e3 * g.device_seconds,
                    1e3 * iteration_seconds.back(), eta);
    }

    make_directories(options.out);
    write_arrays(p, options.out, "true_model", v_true);
    write_arrays(p, options.out, "initial_model", initial_model(p));
    write_arrays(p, options.out, "final_model", velocity);
    write_arrays(p, options.out, "first_gradient", first_gradient);
    write_npy(options.out + "/observed_gathers.npy", observed.data(), {size_t(p.nshots), size_t(p.nt), size_t(p.nrec)});
    std::printf("wrote true/initial/final models, the first gradient and the observed gathers to %s/\n",
                options.out.c_str());

    // 01 is the reference the others are checked against; its own check is that the inversion works:
    // with a single iteration nothing can be compared, otherwise the misfit must have decreased.
    const bool decreased = misfits.size() < 2 || misfits.back() < misfits.front();
    const double gradient_time = median(gradient_seconds);
    const Difference model_change = compare(velocity, initial_model(p));
    std::printf("%s: 1 GPU: %.4f s per gradient (median of %d), misfit %.4e -> %.4e, peak device memory %.2f GiB\n",
                p.summary().c_str(), gradient_time, options.iterations, misfits.front(), misfits.back(),
                gib(gpu.peak_allocated_bytes()));
    JsonObject result;
    result.add("pattern", "01_single_gpu")
        .add("gpus", 1)
        .add("ranks", 1)
        .add("problem", p.name)
        .add("grid", std::to_string(p.nz) + "x" + std::to_string(p.nx))
        .add("shots", p.nshots)
        .add("nt", p.nt)
        .add("iterations", options.iterations)
        .add("time_per_gradient_s", gradient_time)
        .add("time_per_iteration_s", median(iteration_seconds))
        .add("total_s", total.seconds())
        .add("misfit_first", misfits.front())
        .add("misfit_final", misfits.back())
        .add("model_rel_change", model_change.relative_l2)
        .add("peak_device_bytes", static_cast<long long>(gpu.peak_allocated_bytes()))
        .add("verified", decreased);
    emit_result(result, options.json);
    if (!decreased) throw VerificationError("the misfit did not decrease over the iterations");
    std::printf("verified: the misfit decreased to %.4f of its first value\n", misfits.back() / misfits.front());
    return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
    return run_program("01_single_gpu", [&]() -> int {
        // --verify uses the small problem unless --problem says otherwise.
        const bool verify_requested = [&] {
            for (int i = 1; i < argc; ++i)
                if (std::string(argv[i]) == "--verify") return true;
            return false;
        }();
        Problem problem = ArgParser::find_value(argc, argv, "--problem").empty() && verify_requested
                              ? problem_preset("small")
                              : preset_from_args(argc, argv);
        Options options;
        ArgParser parser("01_single_gpu", "Full-waveform inversion on one GPU: the baseline of the suite.");
        add_problem_flags(parser, problem);
        parser.add_int("--iterations", &options.iterations, 1, 100000, "FWI iterations");
        parser.add_string("--out", &options.out, "folder for the .npy models, gradient and gathers");
        parser.add_string("--json", &options.json, "also write the RESULT object to this file");
        parser.add_switch("--verify", &options.verify,
                          "compare GPU and CPU reference on the (small by default) problem instead");
        if (!parser.parse(argc, argv)) return kExitOk;
        validate(problem);
        if (options.verify) {
            require_gpus(1);
            return verify_against_cpu(problem, options.json);
        }
        return run_fwi(problem, options);
    });
}
