// The skeleton every FWI lesson (01, 03, 04, 05, 06) runs: one GPU's share of the shots, the iteration
// loop with its phase timers, the single-GPU reference, the verification, the speedup line and the
// RESULT line. A lesson supplies only its layout (threads or ranks: a Team) and its combine.
//
// One iteration on one GPU, and the phases every program reports the same way:
//
//   [start together] -> compute -> wait -> combine -> update
//
//   compute  from the start of the iteration until this GPU's gradient and misfit are in its memory
//   wait     until every GPU has its gradient (a barrier: the slowest GPU sets it)
//   combine  the lesson's own code, until this GPU holds the sum over all GPUs
//   update   the model update, on the device
//
// The gradient and the model stay in device memory through all of it. The host sees the 8-byte misfit
// (the propagator returns it on the host, compute() uploads it for the combine, and the progress line
// reads the combined one back), and copies of the gradient and model only after the last iteration, for
// verification and output, or when a lesson asks for them (06's snapshots and checkpoints).
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <string>
#include <vector>

#include "cli.hpp"
#include "device_update.hpp"
#include "gpu_propagator.hpp"
#include "gpu_resources.hpp"
#include "output.hpp"
#include "problem.hpp"
#include "shot_split.hpp"
#include "team.hpp"

namespace fwi {

struct ShotParallelOptions {
    int iterations = 3;
    bool no_reference = false;
    double timeout_s = 60.0;
    std::string json;
};

// --iterations, --no-reference, --timeout, --json (`json_note`: what the program adds to --json's help)
void add_shot_parallel_flags(ArgParser& parser, ShotParallelOptions& options, const std::string& json_note = "");

// Every GPU's shots, in order, for one process that drives `gpus` GPUs (split_shots for parts
// 0..gpus-1): throws UsageError when a GPU would get no shot, before any GPU is touched.
std::vector<ShotRange> split_all_shots(int nshots, int gpus);

// Which observed traces a GpuShare models and holds: its own shots', or every shot's, when the single-GPU
// reference also runs on it (member 0 of a run that checks itself).
enum class Observed { own_shots, all_shots };

// One GPU's part of the inversion, on the device current when it is built (use it only with that
// device current): its shots, a propagator holding the observed traces of those shots (modelled in the
// true model, as if this GPU had read just its share of the data) and this GPU's copy of the model.
// Building it runs an untimed gradient (the warm-up that captures the CUDA graphs) of its own shots and,
// with Observed::all_shots, first of every shot: the reference's larger batch then sizes the workspace
// once, and neither run reallocates it. Each GPU builds one propagator for the whole process, and the
// reference reuses it (why: 01's README, "What limits its speed").
class GpuShare {
public:
    GpuShare(const Problem& problem, const ShotRange& shots, const std::vector<float>& model,
             Observed observed = Observed::own_shots);

    // This GPU's gradient into device_gradient() and its misfit into device_misfit(); both complete when it
    // returns.
    void compute();
    // Instead of a gradient and a misfit, what run_iterations' warm-up combine sums to check the combine:
    // allreduce_input(member, i) in element i (small integers, whose sum over the members a float holds
    // exactly, different at every element and member) and member + 1; complete when it returns.
    void load_combine_check(int member);
    // The model update from device_gradient(), on the device (the same on every GPU holding the same sum).
    void update();
    void set_model(const std::vector<float>& model);

    // What the combine sums in place, over all GPUs: nz x nx floats and one double, in device memory.
    float* device_gradient() const { return propagator_.device_gradient(); }
    size_t gradient_count() const { return problem_.model_cells(); }
    double* device_misfit() const { return misfit_.data(); }
    // Puts `misfit` into device_misfit() (a combine through host memory brings it back that way) and waits,
    // with the propagator's time limit, until the stream has done it and the work before; `what` names that
    // wait in a timeout's message.
    void upload_misfit(double misfit, const std::string& what);
    // The stream the propagator and the update run on; a combine that enqueues work uses it too.
    cudaStream_t stream() const { return propagator_.stream(); }

    // Host copies, for verification and output. The gradient's and the model's first wait, with a time limit,
    // for the work before; the misfit's does not, as every caller's stream is idle by then (compute(), a
    // combine's wait and update() each end with a wait of their own), and 03 times it in its combine.
    double download_misfit() const { return misfit_.download(1, stream())[0]; }
    std::vector<float> download_gradient() const { return propagator_.download_gradient(); }
    std::vector<float> download_model() const { return propagator_.download_velocity(); }

    const std::vector<int>& shots() const { return shots_; }
    // The shots compute() works on; they must be among those whose observed traces the share holds.
    void set_shots(const std::vector<int>& shots);
    GpuPropagator& propagator() { return propagator_; }
    const Problem& problem() const { return problem_; }

private:
    Problem problem_;
    std::vector<int> shots_, observed_shots_;
    GpuPropagator propagator_;
    DeviceModelUpdate update_;
    DeviceBuffer<double> misfit_;
    double local_misfit_ = 0.0;  // the source of device_misfit()'s upload: it must outlive the copy
};

// The lesson's combine, called on every GPU (by its thread or rank) once every GPU has its gradient:
// returns when this GPU's device_gradient() and device_misfit() hold the sums over all GPUs. `iteration`
// is the one it combines (1-based), or kWarmUpCombine for run_iterations' untimed first call.
using CombineStep = std::function<void(GpuShare&, int iteration)>;
constexpr int kWarmUpCombine = 0;

// One iteration's phases on one GPU, in seconds (see the top of this file).
struct Phases {
    double compute = 0.0, wait = 0.0, combine = 0.0, update = 0.0;
    double gradient_seconds() const { return compute + wait + combine; }  // the time per gradient
    double iteration_seconds() const { return gradient_seconds() + update; }
};

// What the first member sees after each iteration (progress, snapshots, checkpoints).
struct IterationDone {
    int iteration = 0;    // 1-based, counting iterations done before a resume
    int iterations = 0;   // the last iteration of the run
    double misfit = 0.0;  // combined
    Phases phases;
    GpuShare& share;
};
using AfterIteration = std::function<void(const IterationDone&)>;

// What one GPU measured and holds after run_iterations.
struct MemberRecord {
    std::vector<Phases> phases;
    std::vector<double> misfits;                                     // combined; the same on every GPU
    std::vector<float> first_gradient, final_model, final_gradient;  // combined gradients
};

// The first iteration of a run that does not resume from a checkpoint.
constexpr int kFirstIteration = 1;

// Iterations first_iteration..last_iteration (1-based) of the FWI loop on team member `member`:
// compute, wait, combine, update, timed as above. One combine first, not timed (the warm-up: a first
// collective pays once for loading NCCL's kernels, and for connecting the ranks where NCCL connects them
// then). It sums a known pattern (GpuShare::load_combine_check), which every member checks element by
// element: a combine that misses a member, a chunk or an element, sums twice or averages fails here
// (VerificationError), with or without a reference run; one that hands back an earlier call's result would
// hand the first iteration that pattern, not a gradient sum, which the check against the reference sees.
// Every member calls it; `after` is called on member 0 only.
MemberRecord run_iterations(Team& team, int member, GpuShare& share, const CombineStep& combine, int first_iteration,
                            int last_iteration, const AfterIteration& after = {});

// The single-GPU reference: all shots on one GPU, the same loop from the same model, timed the same way
// (compute is the whole gradient; there is nothing to wait for or combine). It runs on member 0's share,
// built with Observed::all_shots, after the multi-GPU run (so it does not disturb that run's timings: the
// other GPUs wait for it outside them, at the join or in wait_for_rank0_to_finish), and leaves the share
// with its own shots.
struct ReferenceRun {
    double time_per_gradient = 0.0;  // median over the iterations
    std::vector<double> misfits;
    std::vector<float> first_gradient, final_model;
};
ReferenceRun run_reference(GpuShare& share, const std::vector<float>& model, int iterations);

// A run as the report sees it: which program, and its members' records summarized (collective).
struct RunSummary {
    std::string pattern, variant;
    int gpus = 1, ranks = 1, first_iteration = 1;
    std::vector<double> misfits;
    std::vector<float> first_gradient, final_model;
    bool models_identical = true;
    // Per phase, each GPU's median over the iterations, then min / median / max over the GPUs.
    struct Spread {
        double min = 0.0, median = 0.0, max = 0.0;
    } compute, wait, combine, update;
    // Per iteration the slowest GPU's gradient (compute + wait + combine) and iteration; the medians.
    double time_per_gradient = 0.0, time_per_iteration = 0.0;
    JsonObject details;  // the lesson's own figures, e.g. 03's copy and MPI times
};
// Collective over the team: every member calls it; the result is complete on member 0.
RunSummary summarize(Team& team, int member, const MemberRecord& record, const std::string& pattern,
                     const std::string& variant, int first_iteration);

// Prints the verdict, the speedup line and the RESULT line (kind "fwi"), and throws VerificationError
// when a check fails: the GPUs' models differ, the misfit did not decrease or is not finite, or (with a
// reference) the first gradient, first misfit or final model differ beyond the tolerances.
void report(const Problem& problem, const RunSummary& run, const ReferenceRun* reference, const std::string& json_path);

}  // namespace fwi
