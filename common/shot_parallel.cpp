#include "shot_parallel.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "cuda_check.hpp"
#include "errors.hpp"
#include "output.hpp"
#include "timing.hpp"
#include "update.hpp"
#include "verify.hpp"

namespace fwi {

namespace {

// Tolerances against the single-GPU reference. Every shot's contribution is computed by the same
// kernels in both runs; what differs is the order of the float32 sums (the gradient folds a batch's
// shots together, and the batches are not the same when the shots are split), which moves a sum by a
// few ulps (~1e-7 relative). 1e-5 keeps a wide margin and still catches any real error: a missing or
// doubled shot, or an average instead of a sum, changes the gradient by more than 1e-2. The misfit is
// summed in float64; the model moves by at most --step-size per iteration in proportion to the gradient.
constexpr double kGradientTolerance = 1e-5;
constexpr double kMisfitTolerance = 1e-6;
constexpr double kModelTolerance = 1e-6;

}  // namespace

void add_shot_parallel_flags(ArgParser& parser, ShotParallelOptions& options) {
    parser.add_int("--iterations", &options.iterations, 1, 100000, "FWI iterations (all timed, after a warm-up)");
    parser.add_switch("--no-reference", &options.no_reference,
                      "skip the single-GPU reference run (no speedup, no comparison)");
    parser.add_double("--timeout", &options.timeout_s, 1.0, 86400.0,
                      "seconds any wait on another GPU or rank may take before the communicators are aborted (exit 3)");
    parser.add_switch("--verbose", &options.verbose, "print each GPU and how to see NCCL's transports");
    parser.add_string("--json", &options.json, "also write the RESULT object to this file");
}

std::vector<ShotRange> split_all_shots(int nshots, int parts) {
    std::vector<ShotRange> ranges;
    for (int part = 0; part < parts; ++part) ranges.push_back(split_shots(nshots, parts, part));
    return ranges;
}

GpuShare::GpuShare(const Problem& problem, const ShotRange& shots)
    : problem_(problem),
      shots_(shots.shots()),
      propagator_(problem, true_model(problem)),
      velocity_(initial_model(problem)),
      gradient_(problem.model_cells()),
      misfit_(1) {
    propagator_.require_gradient_fits();
    propagator_.set_observed(propagator_.observed_traces_of(shots_));
    propagator_.set_velocity(velocity_);
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    CUDA_CHECK(cudaMemsetAsync(gradient_.data(), 0, gradient_.bytes(), stream_));
    CUDA_CHECK(cudaMemsetAsync(misfit_.data(), 0, misfit_.bytes(), stream_));
    propagator_.gradient(shots_);  // warm-up: builds the CUDA graphs; not timed
}

GpuShare::~GpuShare() { cudaStreamDestroy(stream_); }

void GpuShare::compute_and_stage() {
    const GradientResult local = propagator_.gradient(shots_);
    gradient_.upload(local.gradient, stream_);
    misfit_.upload({local.misfit}, stream_);
}

void GpuShare::download_combined(std::vector<float>& gradient, double& misfit) const {
    gradient = gradient_.download(gradient_.size(), stream_);
    misfit = misfit_.download(1, stream_)[0];
}

void GpuShare::update(const std::vector<float>& combined_gradient) {
    update_model(problem_, combined_gradient, velocity_);
    propagator_.set_velocity(velocity_);
}

ReferenceRun run_reference(const Problem& problem, int iterations) {
    GpuShare share(problem, ShotRange{0, problem.nshots});
    ReferenceRun reference;
    for (int it = 0; it < iterations; ++it) {
        HostTimer timer;
        const GradientResult g = share.propagator().gradient(share.shots());
        reference.gradient_seconds.push_back(timer.seconds());
        if (it == 0) {
            reference.first_gradient = g.gradient;
            reference.first_misfit = g.misfit;
        }
        share.update(g.gradient);
        reference.iteration_seconds.push_back(timer.seconds());
    }
    reference.final_model = share.velocity();
    std::printf("reference: 1 GPU, all %d shots: %.4f s per gradient (median of %d)\n", problem.nshots,
                median(reference.gradient_seconds), iterations);
    return reference;
}

void print_iteration(int iteration, int iterations, double misfit, double gradient_s, double combine_s,
                     double iteration_s) {
    std::printf("iteration %3d/%d  misfit %.6e  gradient %8.2f ms (combine %.2f ms)  iteration %8.2f ms  ETA %.1f s\n",
                iteration + 1, iterations, misfit, 1e3 * gradient_s, 1e3 * combine_s, 1e3 * iteration_s,
                iteration_s * (iterations - iteration - 1));
    std::fflush(stdout);
}

void verify_and_report(const Problem& p, const ShotParallelRun& run, const ReferenceRun* reference,
                       const std::string& json_path) {
    const double gradient_time = median(run.gradient_seconds);
    const double iteration_time = median(run.iteration_seconds);
    const double combine_time = median(run.combine_seconds);
    const std::string gpus = std::to_string(run.gpus) + " GPU" + (run.gpus > 1 ? "s" : "");

    JsonObject result;
    result.add("pattern", run.pattern)
        .add("variant", run.variant)
        .add("gpus", run.gpus)
        .add("ranks", run.ranks)
        .add("problem", p.name)
        .add("grid", std::to_string(p.nz) + "x" + std::to_string(p.nx))
        .add("shots", p.nshots)
        .add("nt", p.nt)
        .add("iterations", static_cast<int>(run.gradient_seconds.size()))
        .add("time_per_gradient_s", gradient_time)
        .add("time_per_iteration_s", iteration_time);

    std::string failures;
    if (!run.models_identical) failures += "the GPUs' models differ from each other after the identical updates; ";
    if (reference) {
        const double reference_time = median(reference->gradient_seconds);
        const double speedup = reference_time / gradient_time;
        const Difference gradient = compare(run.first_gradient, reference->first_gradient);
        const Difference model = compare(run.final_model, reference->final_model);
        const double misfit_diff = std::abs(run.first_misfit - reference->first_misfit) /
                                   std::max(std::abs(reference->first_misfit), 1e-300);
        std::printf("%s: 1 GPU: %.4f s, %s: %.4f s, speedup: %.2f, efficiency: %.0f%%, grad rel diff: %.0e\n",
                    p.summary().c_str(), reference_time, gpus.c_str(), gradient_time, speedup,
                    100.0 * speedup / run.gpus, gradient.relative_l2);
        std::printf("against the reference: gradient %s; misfit rel diff %.1e; final model %s\n",
                    describe(gradient).c_str(), misfit_diff, describe(model).c_str());
        if (gradient.relative_l2 > kGradientTolerance) failures += "gradient rel L2 above 1e-5; ";
        if (misfit_diff > kMisfitTolerance) failures += "misfit rel diff above 1e-6; ";
        if (model.relative_l2 > kModelTolerance) failures += "final model rel L2 above 1e-6; ";
        result.add("reference_time_per_gradient_s", reference_time)
            .add("speedup", speedup)
            .add("efficiency", speedup / run.gpus)
            .add("grad_rel_diff", gradient.relative_l2)
            .add("misfit_rel_diff", misfit_diff)
            .add("model_rel_diff", model.relative_l2);
    } else {
        std::printf("%s: %s: %.4f s per gradient (no reference run: no speedup, no comparison)\n",
                    p.summary().c_str(), gpus.c_str(), gradient_time);
    }
    std::printf("combine: %.3f ms per iteration (%.1f%% of an iteration); models on all %s identical: %s\n",
                1e3 * combine_time, 100.0 * combine_time / iteration_time, gpus.c_str(),
                run.models_identical ? "yes" : "NO");
    const bool verified = failures.empty();
    result.add("combine_s", combine_time)
        .add("combine_share", combine_time / iteration_time)
        .add("models_identical", run.models_identical)
        .add("verified", verified);
    emit_result(result, json_path);
    if (!verified) throw VerificationError(failures.substr(0, failures.size() - 2));
    std::printf("verified: %s\n", reference ? "gradient, misfit and model match the single-GPU reference"
                                             : "every GPU holds the same model (no reference to compare with)");
}

}  // namespace fwi
