#include "shot_parallel.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <stdexcept>

#include "allreduce_sweep.hpp"
#include "cuda_check.hpp"
#include "errors.hpp"
#include "model_checks.hpp"
#include "nvtx.hpp"
#include "timing.hpp"
#include "tolerances.hpp"
#include "verify.hpp"

namespace fwi {

void add_shot_parallel_flags(ArgParser& parser, ShotParallelOptions& options, const std::string& json_note) {
    parser.add_int("--iterations", &options.iterations, 1, kMaxIterations,
                   "FWI iterations (all timed, after a warm-up)");
    parser.add_switch("--no-reference", &options.no_reference,
                      "skip the single-GPU reference run (no speedup, no comparison)");
    parser.add_double("--timeout", &options.timeout_s, 1.0, 86400.0,
                      "seconds any wait on another GPU or rank may take before the run gives up (exit 3)");
    parser.add_string("--json", &options.json, "also write the RESULT object to this file" + json_note);
}

std::vector<ShotRange> split_all_shots(int nshots, int gpus) {
    std::vector<ShotRange> ranges;
    for (int gpu = 0; gpu < gpus; ++gpu) ranges.push_back(split_shots(nshots, gpus, gpu, "GPUs"));
    return ranges;
}

// ---- one GPU's share -----------------------------------------------------------------------------

GpuShare::GpuShare(const Problem& problem, const ShotRange& shots, const std::vector<float>& model, Observed observed)
    : problem_(problem),
      shots_(shots.shots()),
      observed_shots_(observed == Observed::all_shots ? all_shots(problem.nshots) : shots_),
      propagator_(problem, true_model(problem)),
      update_(problem),
      misfit_(1) {
    propagator_.require_gradient_fits();  // refuse now, not after modelling the observed data
    propagator_.set_observed(propagator_.observed_traces_of(observed_shots_));
    propagator_.set_velocity(model);
    // Warm-ups, not timed: they size the workspace (the larger batch first) and capture the CUDA graphs.
    if (observed_shots_ != shots_) propagator_.gradient(observed_shots_);
    compute();
}

void GpuShare::set_shots(const std::vector<int>& shots) {
    for (int shot : shots)
        if (std::find(observed_shots_.begin(), observed_shots_.end(), shot) == observed_shots_.end())
            throw std::logic_error("GpuShare::set_shots: shot " + std::to_string(shot) +
                                   "'s observed traces are not held (build the share with Observed::all_shots)");
    shots_ = shots;
}

void GpuShare::compute() {
    NvtxRange range("compute");
    upload_misfit(propagator_.gradient(shots_).misfit, "the copy of the misfit");
}

void GpuShare::upload_misfit(double misfit, const std::string& what) {
    local_misfit_ = misfit;
    CUDA_CHECK(cudaMemcpyAsync(misfit_.data(), &local_misfit_, sizeof(double), cudaMemcpyHostToDevice, stream()));
    propagator_.finish(what);
}

void GpuShare::load_combine_check(int member) {
    std::vector<float> pattern(gradient_count());
    for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = allreduce_input(member, i);
    CUDA_CHECK(cudaMemcpyAsync(device_gradient(), pattern.data(), pattern.size() * sizeof(float),
                               cudaMemcpyHostToDevice, stream()));
    upload_misfit(member + 1, "the copy of the combine's check pattern");  // and so of the pattern before it
}

void GpuShare::update() {
    NvtxRange range("update");
    update_.apply(device_gradient(), propagator_.device_velocity(), stream());
    propagator_.velocity_changed();  // and waits for the stream
}

void GpuShare::set_model(const std::vector<float>& model) { propagator_.set_velocity(model); }

// ---- the loop --------------------------------------------------------------------------------------

namespace {

// Throws VerificationError unless `share` holds, element by element, the sum over `members` members of what
// GpuShare::load_combine_check loaded, and their misfits' sum, 1 + 2 + ... + members.
void require_combine_check(const GpuShare& share, int member, int members) {
    const std::vector<float> sum = share.download_gradient();
    size_t wrong = 0, first_wrong = 0;
    for (size_t i = 0; i < sum.size(); ++i)
        if (sum[i] != allreduce_expected_sum(members, i) && wrong++ == 0) first_wrong = i;
    const double misfit = share.download_misfit(), expected_misfit = 0.5 * members * (members + 1.0);
    if (wrong == 0 && misfit == expected_misfit) return;
    std::string what = "the combine is wrong: summing a known pattern over the " + count_of(members, "GPU") +
                       " (the untimed first combine), member " + std::to_string(member) + " holds ";
    if (wrong > 0)
        what += std::to_string(wrong) + " wrong elements of " + std::to_string(sum.size()) + " (element " +
                std::to_string(first_wrong) + ": " + format_number(sum[first_wrong]) + ", expected " +
                format_number(allreduce_expected_sum(members, first_wrong)) + ")" +
                (misfit == expected_misfit ? "" : " and ");
    if (misfit != expected_misfit)
        what += "the misfit's sum " + format_number(misfit) + ", expected " + format_number(expected_misfit);
    throw VerificationError(what);
}

// The warm-up combine, not timed: a first collective pays costs the later ones do not (run_iterations in the
// header). It sums a known pattern, which each member checks. A combine may queue work on the other members'
// streams (04's group driver: GPU 0's thread issues every GPU's allreduce), so every pattern must be in place
// first, as every gradient is in place before an iteration's combine.
void warm_up_and_check_combine(Team& team, int member, GpuShare& share, const CombineStep& combine) {
    share.load_combine_check(member);
    team.barrier(member, "every GPU's check pattern");
    combine(share, kWarmUpCombine);
    require_combine_check(share, member, team.size());
}

void print_progress(const IterationDone& done, double first_misfit, double median_iteration) {
    const Phases& t = done.phases;
    std::printf(
        "iteration %3d/%d  misfit %.6e (%.4f of first)  compute %7.2f  wait %5.2f  combine %6.3f  update %5.2f ms  "
        "iteration %7.2f ms  ETA %.1f s\n",
        done.iteration, done.iterations, done.misfit, first_misfit > 0.0 ? done.misfit / first_misfit : 1.0,
        1e3 * t.compute, 1e3 * t.wait, 1e3 * t.combine, 1e3 * t.update, 1e3 * t.iteration_seconds(),
        median_iteration * (done.iterations - done.iteration));
    std::fflush(stdout);
}

}  // namespace

MemberRecord run_iterations(Team& team, int member, GpuShare& share, const CombineStep& combine, int first_iteration,
                            int last_iteration, const AfterIteration& after) {
    team.barrier(member, "the other GPUs' set-up");
    // (The pattern it sums leaves the gradient wrong: the first iteration computes its gradient afresh.)
    if (combine) warm_up_and_check_combine(team, member, share, combine);

    MemberRecord record;
    DeviceBuffer<float> first_gradient(share.gradient_count());
    std::vector<double> iteration_seconds;
    for (int it = first_iteration; it <= last_iteration; ++it) {
        const std::string label = " (iteration " + std::to_string(it) + ")";
        team.barrier(member, "the start of an iteration" + label);  // so every GPU's clock starts together
        Phases t;
        LapTimer clock;
        share.compute();
        t.compute = clock.lap();
        team.barrier(member, "the slowest GPU's gradient" + label);
        t.wait = clock.lap();
        if (combine) {
            NvtxRange range("combine");
            combine(share, it);
        }
        t.combine = clock.lap();
        if (it == first_iteration)  // kept on the device for the check against the reference
            CUDA_CHECK(cudaMemcpyAsync(first_gradient.data(), share.device_gradient(), first_gradient.bytes(),
                                       cudaMemcpyDeviceToDevice, share.stream()));
        clock.lap();  // leaves out the copy's enqueue; the copy runs ahead of the update on the stream, so
                      // the first iteration's update includes its few microseconds
        share.update();
        t.update = clock.lap();

        record.phases.push_back(t);
        record.misfits.push_back(share.download_misfit());
        // A non-finite misfit means a non-finite wave field or model: stop before anything (a checkpoint,
        // another update) builds on it. Every GPU holds the same combined misfit, so all stop alike.
        if (!std::isfinite(record.misfits.back()))
            throw VerificationError("the misfit is " + format_number(record.misfits.back()) + " at iteration " +
                                    std::to_string(it) + ": the model or the wave fields are no longer finite");
        iteration_seconds.push_back(t.iteration_seconds());
        if (member == 0) {
            IterationDone done{it, last_iteration, record.misfits.back(), t, share};
            print_progress(done, record.misfits.front(), median(iteration_seconds));
            if (after) after(done);
        }
    }
    record.first_gradient = first_gradient.download(first_gradient.size(), share.stream());
    record.final_gradient = share.download_gradient();
    record.final_model = share.download_model();
    require_finite_model(share.problem(), record.final_model, last_iteration);  // the last update's result
    require_finite_gradient(share.problem(), record.first_gradient, "the first gradient");
    require_finite_gradient(share.problem(), record.final_gradient, "the last iteration's gradient");
    return record;
}

ReferenceRun run_reference(GpuShare& share, const std::vector<float>& model, int iterations) {
    NvtxRange range("single-GPU reference");
    const std::vector<int> own_shots = share.shots();
    const std::vector<int> every_shot = all_shots(share.problem().nshots);
    std::printf("\nreference: the same %s on one GPU, all %zu shots (--no-reference skips this)\n",
                count_of(iterations, "iteration").c_str(), every_shot.size());
    std::fflush(stdout);
    share.set_shots(every_shot);
    share.set_model(model);
    ThreadTeam alone = team_of_one();
    const MemberRecord record = run_iterations(alone, 0, share, CombineStep(), kFirstIteration, iterations);
    share.set_shots(own_shots);
    ReferenceRun reference;
    std::vector<double> gradient_seconds;
    for (const Phases& t : record.phases) gradient_seconds.push_back(t.gradient_seconds());
    reference.time_per_gradient = median(gradient_seconds);
    reference.misfits = record.misfits;
    reference.first_gradient = record.first_gradient;
    reference.final_model = record.final_model;
    std::printf("reference: 1 GPU: %.4f s per gradient (median of %d)\n", reference.time_per_gradient, iterations);
    return reference;
}

// ---- summary and report ------------------------------------------------------------------------------

namespace {

RunSummary::Spread spread(std::vector<double> values) {
    std::sort(values.begin(), values.end());
    return {values.front(), median(values), values.back()};
}

// Per iteration, the largest value over the members; then the median over the iterations.
double median_of_slowest(const std::vector<std::vector<double>>& per_member, size_t first, size_t count) {
    std::vector<double> slowest(count, 0.0);
    for (const auto& values : per_member)
        for (size_t i = 0; i < count; ++i) slowest[i] = std::max(slowest[i], values[first + i]);
    return median(slowest);
}

JsonObject spread_json(const RunSummary::Spread& s) {
    return JsonObject().add("min", s.min).add("median", s.median).add("max", s.max);
}

std::string tolerance_text(double value) {
    char text[32];
    std::snprintf(text, sizeof text, "%.0e", value);
    return text;
}

// "falls every iteration" or "rises at iteration 25, 27"
std::string misfit_trend(const std::vector<double>& misfits, int first_iteration) {
    std::string rises;
    for (size_t i = 1; i < misfits.size(); ++i)
        if (misfits[i] > misfits[i - 1]) rises += (rises.empty() ? "" : ", ") + std::to_string(first_iteration + i);
    return rises.empty() ? "falls every iteration" : "rises at iteration " + rises;
}

}  // namespace

RunSummary summarize(Team& team, int member, const MemberRecord& record, const std::string& pattern,
                     const std::string& variant, int first_iteration) {
    // Each member sends its per-iteration gradient and iteration times, then its four phase medians.
    const size_t n = record.phases.size();
    std::vector<double> mine;
    for (const Phases& t : record.phases) mine.push_back(t.gradient_seconds());
    for (const Phases& t : record.phases) mine.push_back(t.iteration_seconds());
    const auto median_of = [&](double Phases::*phase) {
        std::vector<double> values;
        for (const Phases& t : record.phases) values.push_back(t.*phase);
        return median(values);
    };
    mine.push_back(median_of(&Phases::compute));
    mine.push_back(median_of(&Phases::wait));
    mine.push_back(median_of(&Phases::combine));
    mine.push_back(median_of(&Phases::update));
    const std::vector<std::vector<double>> all = team.gather(member, mine);

    RunSummary run;
    run.pattern = pattern;
    run.variant = variant;
    run.gpus = team.size();
    run.ranks = team.ranks();
    run.first_iteration = first_iteration;
    run.models_identical = team.same_on_all(member, record.final_model);
    if (member != 0) return run;
    run.misfits = record.misfits;
    run.first_gradient = record.first_gradient;
    run.final_model = record.final_model;
    run.time_per_gradient = median_of_slowest(all, 0, n);
    run.time_per_iteration = median_of_slowest(all, n, n);
    RunSummary::Spread* phases[] = {&run.compute, &run.wait, &run.combine, &run.update};
    for (size_t k = 0; k < 4; ++k) {
        std::vector<double> values;
        for (const auto& member_values : all) values.push_back(member_values[2 * n + k]);
        *phases[k] = spread(values);
    }
    return run;
}

namespace {

// The checks a run passes with or without a reference: every GPU holds the same model, and the misfit is
// finite and falls.
std::vector<std::string> run_failures(const RunSummary& run) {
    const double misfit_first = run.misfits.front(), misfit_final = run.misfits.back();
    std::vector<std::string> failures;
    if (!run.models_identical) failures.push_back("the GPUs' models differ from each other after the same updates");
    if (!std::isfinite(misfit_first) || !std::isfinite(misfit_final))
        failures.push_back("the misfit is not a finite number");
    else if (misfit_first == 0.0)
        failures.push_back(
            "the misfit is zero from the first iteration: the starting model already fits the observed data over the "
            "recorded window, so there is nothing to invert or to verify");
    else if (run.misfits.size() >= 2 && !(misfit_final < misfit_first))
        failures.push_back("the misfit did not decrease over the iterations (" +
                           misfit_trend(run.misfits, run.first_iteration) + ")");
    return failures;
}

// The RESULT's `verification` and `reference` objects, as far as the comparison with the single-GPU run
// fills them (nulls without one).
struct ReferenceFields {
    JsonObject verification;
    std::optional<JsonObject> reference;  // none without a reference run
};

// Prints the run's time (against the reference's, when there is one) and how far its first gradient,
// first misfit and final model are from the reference's; adds to `failures` what is beyond the tolerances.
ReferenceFields compare_with_reference(const Problem& p, const RunSummary& run, const ReferenceRun* reference,
                                       const std::string& gpus, std::vector<std::string>& failures) {
    ReferenceFields fields;
    if (!reference) {
        std::printf("%s: %s: %.4f s per gradient (median of %zu%s)\n", p.summary().c_str(), gpus.c_str(),
                    run.time_per_gradient, run.misfits.size(), run.gpus > 1 ? "; no reference run" : "");
        fields.verification.add("grad_rel_diff", nullptr)
            .add("misfit_rel_diff", nullptr)
            .add("model_rel_diff", nullptr);
        return fields;
    }
    const double speedup = reference->time_per_gradient / run.time_per_gradient;
    const Difference gradient = compare(run.first_gradient, reference->first_gradient);
    const Difference model = compare(run.final_model, reference->final_model);
    const double misfit_diff = std::abs(run.misfits.front() - reference->misfits.front()) /
                               std::max(std::abs(reference->misfits.front()), 1e-300);
    std::printf("%s: 1 GPU: %.4f s, %s: %.4f s, speedup: %.2f, efficiency: %.0f%%, grad rel diff: %.0e\n",
                p.summary().c_str(), reference->time_per_gradient, gpus.c_str(), run.time_per_gradient, speedup,
                100.0 * speedup / run.gpus, gradient.relative_l2);
    std::printf("against the reference: first gradient %s; first misfit rel diff %.1e; final model %s\n",
                describe(gradient).c_str(), misfit_diff, describe(model).c_str());
    // A bad first gradient means a wrong combine; a good one with a bad final model means the runs
    // drifted apart (see tolerances.hpp), which a long run whose misfit stopped falling can do.
    if (!(gradient.relative_l2 <= tolerance::kGradient) || !(misfit_diff <= tolerance::kMisfit))
        failures.push_back("the first gradient or misfit differs from the single-GPU run beyond " +
                           tolerance_text(tolerance::kGradient) + " / " + tolerance_text(tolerance::kMisfit) +
                           ": the combine is wrong");
    else if (!(model.relative_l2 <= tolerance::kModel))
        failures.push_back("the first gradient matches the single-GPU run, but the final model differs beyond " +
                           tolerance_text(tolerance::kModel) + " (reference misfit " +
                           misfit_trend(reference->misfits, run.first_iteration) +
                           "); a fixed-size update that overshoots amplifies float rounding each iteration: check "
                           "long runs by their first gradient (fewer --iterations) or use --no-reference");
    fields.verification.add("grad_rel_diff", gradient.relative_l2)
        .add("misfit_rel_diff", misfit_diff)
        .add("model_rel_diff", model.relative_l2);
    fields.reference = JsonObject()
                           .add("time_per_gradient_s", reference->time_per_gradient)
                           .add("speedup", speedup)
                           .add("efficiency", speedup / run.gpus);
    return fields;
}

void print_phases(const RunSummary& run, const std::string& gpus) {
    std::printf(
        "phases (ms; min / median / max over the GPUs): compute %.2f / %.2f / %.2f, wait %.2f / %.2f / %.2f, combine "
        "%.3f / %.3f / %.3f, update %.3f / %.3f / %.3f\n",
        1e3 * run.compute.min, 1e3 * run.compute.median, 1e3 * run.compute.max, 1e3 * run.wait.min,
        1e3 * run.wait.median, 1e3 * run.wait.max, 1e3 * run.combine.min, 1e3 * run.combine.median,
        1e3 * run.combine.max, 1e3 * run.update.min, 1e3 * run.update.median, 1e3 * run.update.max);
    std::printf("combine: %.1f%% of an iteration; misfit %.4e -> %.4e; models on all %s identical: %s\n",
                100.0 * run.combine.median / run.time_per_iteration, run.misfits.front(), run.misfits.back(),
                gpus.c_str(), run.models_identical ? "yes" : "NO");
}

// The RESULT object of kind "fwi" (docs/RESULT.md).
JsonObject fwi_result(const Problem& p, const RunSummary& run, ReferenceFields fields, bool verified) {
    fields.verification.add("models_identical", run.models_identical)
        .add("misfit_first", run.misfits.front())
        .add("misfit_final", run.misfits.back())
        .add("tolerances", JsonObject()
                               .add("gradient", tolerance::kGradient)
                               .add("misfit", tolerance::kMisfit)
                               .add("model", tolerance::kModel));
    JsonObject result;
    result.add("kind", "fwi")
        .add("pattern", run.pattern)
        .add("variant", run.variant)
        .add("gpus", run.gpus)
        .add("ranks", run.ranks)
        .add("problem", p.name)
        .add("grid", std::vector<long long>{p.nz, p.nx})
        .add("shots", p.nshots)
        .add("nt", p.nt)
        .add("iterations", static_cast<int>(run.misfits.size()))
        .add("first_iteration", run.first_iteration)
        .add("time_per_gradient_s", run.time_per_gradient)
        .add("time_per_iteration_s", run.time_per_iteration)
        .add("phases_s", JsonObject()
                             .add("compute", spread_json(run.compute))
                             .add("wait", spread_json(run.wait))
                             .add("combine", spread_json(run.combine))
                             .add("update", spread_json(run.update)))
        .add("combine_share", run.combine.median / run.time_per_iteration)
        .add("gradient_bytes", static_cast<long long>(p.model_cells() * sizeof(float)));
    if (fields.reference)
        result.add("reference", *fields.reference);
    else
        result.add("reference", nullptr);
    result.add("verification", fields.verification).add("details", run.details).add("verified", verified);
    return result;
}

}  // namespace

void report(const Problem& p, const RunSummary& run, const ReferenceRun* reference, const std::string& json_path) {
    const std::string gpus = count_of(run.gpus, "GPU");
    std::vector<std::string> failures = run_failures(run);
    ReferenceFields fields = compare_with_reference(p, run, reference, gpus, failures);
    print_phases(run, gpus);
    const bool verified = failures.empty();
    emit_result(fwi_result(p, run, std::move(fields), verified), json_path);

    if (!verified) throw VerificationError(join(failures, "; "));
    const std::string misfit_check =
        run.misfits.size() >= 2 ? "the misfit decreased" : "the misfit is finite (one iteration: nothing to compare)";
    // Without a reference, what was checked: the combine (run_iterations' warm-up; only a sum over several
    // members, GPUs or ranks, says anything), the models and the misfit, and that the gradient itself was
    // compared with nothing.
    const bool combined = std::max(run.gpus, run.ranks) > 1;
    const std::string unreferenced =
        combined ? "the combine summed a known pattern exactly; every GPU holds the same model; " + misfit_check +
                       " (no single-GPU reference run to compare the gradient with)"
                 : misfit_check;
    std::printf("verified: %s\n",
                reference ? "first gradient, misfit and final model match the single-GPU run" : unreferenced.c_str());
}

}  // namespace fwi
