#include "verify_against_cpu.hpp"

#include <cstdio>
#include <string>
#include <vector>

#include "cpu_propagator.hpp"
#include "errors.hpp"
#include "gpu_propagator.hpp"
#include "output.hpp"
#include "progress.hpp"
#include "shot_split.hpp"
#include "tolerances.hpp"
#include "verify.hpp"

namespace fwi {

// GPU against CPU reference: traces of every shot, then misfit and gradient from the initial model.
int verify_against_cpu(const Problem& p, const std::string& json_path) {
    using tolerance::kCpuGradient;
    using tolerance::kCpuTraces;
    std::printf("verify: %s on GPU and on the CPU reference (float32 both)\n", p.summary().c_str());
    const std::vector<int> shots = all_shots(p.nshots);
    // The GPU first: a run it cannot do is refused before the CPU reference's minutes.
    GpuPropagator gpu(p, true_model(p));
    gpu.require_gradient_fits();
    // The CPU reference works one shot at a time on one core; on large problems it reports its progress.
    // The time left weighs a shot's gradient (a forward pass that keeps every step, then the adjoint) as
    // 3.5 times its traces (measured 2.9 to 4.5 times on three machines).
    constexpr double kGradientPerTraces = 3.5;
    const int n = p.nshots;
    const auto shots_text = [n](int done) { return std::to_string(done) + " of " + std::to_string(n) + " shots"; };
    ProgressReport progress("CPU reference", n * (1.0 + kGradientPerTraces));
    const std::vector<float> observed = CpuPropagator<float>(p, true_model(p)).model_all_shots([&](int done) {
        progress.done(done, "traces of " + shots_text(done));
    });
    const std::vector<float> gpu_observed = gpu.observed_traces_of(shots);
    const Difference traces = compare(gpu_observed, observed);
    std::printf("  traces:   %s\n", describe(traces).c_str());

    std::vector<float> cpu_gradient;
    const double cpu_misfit =
        CpuPropagator<float>(p, initial_model(p)).misfit_gradient(shots, observed, cpu_gradient, [&](int done) {
            progress.done(n + kGradientPerTraces * done, "traces done, gradient of " + shots_text(done));
        });
    // Each side inverts the data it modelled itself, as a run does. The residual (modelled minus observed)
    // is the reflection (in the presets, whose initial model is the top layer's velocity), far weaker than
    // the direct wave in both traces. On one side the direct wave's rounding is the same in both and
    // cancels; the other side's observed data would leave the two sides' rounding difference of the
    // direct wave in the residual. On the default problem that moved the gradient by 1e-2 relative L2,
    // where each side with its own data agrees within 1.2e-4.
    gpu.set_velocity(initial_model(p));
    gpu.set_observed(gpu_observed);
    const GradientResult g = gpu.gradient(shots);
    const Difference gradient = compare(gpu.download_gradient(), cpu_gradient);
    const double misfit_diff = compare(&g.misfit, &cpu_misfit, 1).relative_l2;  // absolute when the CPU's is 0
    std::printf("  misfit:   GPU %.6e, CPU %.6e, rel diff %.1e\n", g.misfit, cpu_misfit, misfit_diff);
    std::printf("  gradient: %s\n", describe(gradient).c_str());

    const bool ok = traces.relative_l2 < kCpuTraces && gradient.relative_l2 < kCpuGradient && misfit_diff < kCpuTraces;
    JsonObject result;
    result.add("kind", "verify")
        .add("pattern", "01_single_gpu")
        .add("variant", "verify")
        .add("problem", p.name)
        .add("grid", std::vector<long long>{p.nz, p.nx})
        .add("traces_rel_l2", traces.relative_l2)
        .add("gradient_rel_l2", gradient.relative_l2)
        .add("misfit_rel_diff", misfit_diff)
        .add("tolerances",
             JsonObject().add("traces", kCpuTraces).add("gradient", kCpuGradient).add("misfit", kCpuTraces))
        .add("verified", ok);
    emit_result(result, json_path);
    if (!ok)
        throw VerificationError("GPU differs from the CPU reference beyond rel L2 " + format_number(kCpuTraces) +
                                " (traces, misfit) / " + format_number(kCpuGradient) + " (gradient)");
    std::printf("verify: PASSED (tolerances: traces and misfit %.0e, gradient %.0e)\n", kCpuTraces, kCpuGradient);
    return kExitOk;
}

}  // namespace fwi
