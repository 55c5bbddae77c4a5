// 06_fwi_shot_parallel: the whole FWI on many GPUs, one MPI rank per GPU (mpirun -np N), shots spread over
// the ranks and their gradients summed with NCCL.
//
// What you learn: 01's loop, unchanged, on N GPUs. Each rank models the observed data of its own shots and
// computes the misfit and gradient of those shots; one ncclAllReduce (sum) per iteration gives every rank
// the gradient of all shots; every rank applies the same deterministic update, so all hold the same model,
// bit for bit, without ever sending it. And what a long run needs besides: progress with an ETA, model
// snapshots and pictures, checkpoints written atomically and a resume that continues exactly where the
// run stopped. Nothing assumes one node except the choice of GPU from the node-local rank.
//
// What you should see: the misfit falling every iteration, the time per iteration about 1/N of one GPU's,
// the check against the single-GPU run of the same iterations (first gradient and final model), the
// speedup line and a RESULT line; in --out the models, the loss history and PNG pictures of them.
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint.hpp"
#include "device.hpp"
#include "errors.hpp"
#include "gpu_propagator.hpp"
#include "mpi_check.hpp"
#include "mpi_env.hpp"
#include "nccl_check.hpp"
#include "nccl_comm.hpp"
#include "nccl_mpi.hpp"
#include "nvtx.hpp"
#include "output.hpp"
#include "problem.hpp"
#include "run_files.hpp"
#include "shot_split.hpp"
#include "timing.hpp"
#include "update.hpp"
#include "verify.hpp"

using namespace fwi;

namespace {

// Against the single-GPU run of the same iterations. The N-GPU gradient sums the shots' contributions in
// another order (per rank, then across ranks) than one GPU does (per batch), so the first gradients differ
// by float32 rounding (measured 4e-8 relative). Every update scales its step by the gradient's largest
// value, so each iteration carries the difference into the next gradient and the models drift apart
// slowly: 8e-5 relative L2 (at most 3 m/s) after the default 20 iterations on 4 GPUs (README.md). Real
// mistakes are far larger: leaving out one rank's shots changes the first gradient by tens of percent,
// and a wrong update moves the model by a step (40 m/s) or more, 1e-2 relative.
constexpr double kGradientTolerance = 1e-5;  // relative L2, first gradient; also the first misfit
constexpr double kModelTolerance = 1e-3;     // relative L2, final model

struct Options {
    int iterations = 20;
    int save_every = 5;
    int checkpoint_every = 0;
    int kill_after_checkpoint = 0;
    double timeout = 60.0;
    std::string out = "out/06_fwi_shot_parallel";
    std::string resume;
    std::string json;
    bool no_reference = false;
    bool no_plots = false;
};

// Flags that are fine alone but not together; checked before any GPU is touched.
void check_option_combinations(const Options& o) {
    if (o.kill_after_checkpoint == 0) return;
    if (o.checkpoint_every == 0 || o.kill_after_checkpoint % o.checkpoint_every != 0 ||
        o.kill_after_checkpoint >= o.iterations)
        throw UsageError("--kill-after-checkpoint: " + std::to_string(o.kill_after_checkpoint) +
                         " must be a multiple of --checkpoint-every (" + std::to_string(o.checkpoint_every) +
                         ", not 0) below --iterations (" + std::to_string(o.iterations) + ")");
}

// The lesson's own step: every rank's gradient and misfit summed in place over all ranks. The propagator
// hands the gradient over in host memory, so it goes up to the GPU, through one NCCL group of allreduces,
// and back: about 2 x 0.8 MB per iteration on the default problem, little beside the gradient itself.
// The group also takes the maximum of the ranks' local gradient times, so that the combine's own time
// can be told apart from waiting for the slowest rank.
class NcclSum {
public:
    NcclSum(size_t cells, double timeout_s)
        : comm_(nccl_bootstrap_over_mpi(MPI_COMM_WORLD, timeout_s)), gradient_(cells), scalars_(2), timeout_(timeout_s) {
        CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    }
    ~NcclSum() { cudaStreamDestroy(stream_); }
    NcclSum(const NcclSum&) = delete;
    NcclSum& operator=(const NcclSum&) = delete;

    // Returns the slowest rank's local_seconds.
    double operator()(GradientResult& g, double local_seconds, int iteration) {
        NvtxRange range("combine");
        gradient_.upload(g.gradient, stream_);
        scalars_.upload({g.misfit, local_seconds}, stream_);
        double* misfit = scalars_.data();
        double* slowest = scalars_.data() + 1;
        NCCL_CHECK(ncclGroupStart());
        NCCL_CHECK(ncclAllReduce(gradient_.data(), gradient_.data(), gradient_.size(), ncclFloat, ncclSum, comm_, stream_));
        NCCL_CHECK(ncclAllReduce(misfit, misfit, 1, ncclDouble, ncclSum, comm_, stream_));
        NCCL_CHECK(ncclAllReduce(slowest, slowest, 1, ncclDouble, ncclMax, comm_, stream_));
        NCCL_CHECK(ncclGroupEnd());
        // Never a blocking wait: a rank that died would leave this one in cudaStreamSynchronize forever.
        const std::string when = iteration == 0 ? "warm-up" : "iteration " + std::to_string(iteration);
        wait_for_nccl({comm_}, {stream_}, "NCCL allreduce of the gradient (" + when + ")", timeout_);
        g.gradient = gradient_.download(gradient_.size(), stream_);
        const std::vector<double> scalars = scalars_.download(2, stream_);
        g.misfit = scalars[0];
        return scalars[1];
    }

    // The clean end (finalize, waited on with the timeout, then destroy); on error paths the job just ends.
    void close() { nccl_destroy_all({comm_}, timeout_); }

private:
    ncclComm_t comm_;
    cudaStream_t stream_ = nullptr;
    DeviceBuffer<float> gradient_;
    DeviceBuffer<double> scalars_;  // misfit (summed), local gradient seconds (maximum)
    double timeout_;
};

// What the loop measured in this process.
struct LoopRecord {
    std::vector<double> gradient_seconds;   // local gradient + combine: "combined gradient on every rank"
    std::vector<double> combine_seconds;    // from the slowest rank's local gradient to the combined one
    std::vector<double> iteration_seconds;  // + update
    std::vector<float> first_gradient, last_gradient;  // combined
    double first_misfit = 0.0;
};

// Combines the local gradient in place and returns the slowest rank's local_seconds.
using Combine = std::function<double(GradientResult&, double local_seconds, int iteration)>;
using AfterIteration = std::function<void(const FwiState&, const LoopRecord&)>;

// 01's loop from state.iterations_done to `iterations`: the gradient of `shots`, combined (nothing to do on
// one GPU), then the same update on every rank. One untimed warm-up first: it builds the CUDA graphs and
// NCCL's connections.
LoopRecord run_iterations(const Problem& p, GpuPropagator& gpu, const std::vector<int>& shots, const Combine& combine,
                          FwiState& state, int iterations, const AfterIteration& after_iteration) {
    gpu.set_velocity(state.velocity);
    GradientResult warm_up = gpu.gradient(shots);
    combine(warm_up, 0.0, 0);
    LoopRecord record;
    while (state.iterations_done < iterations) {
        HostTimer timer;
        GradientResult g = gpu.gradient(shots);
        const double slowest_local_seconds = combine(g, timer.seconds(), state.iterations_done + 1);
        record.gradient_seconds.push_back(timer.seconds());
        // Below zero only when this rank started late (rank 0, after writing files) and another did not.
        record.combine_seconds.push_back(std::max(0.0, record.gradient_seconds.back() - slowest_local_seconds));
        {
            NvtxRange range("update");
            update_model(p, g.gradient, state.velocity);
            gpu.set_velocity(state.velocity);
        }
        record.iteration_seconds.push_back(timer.seconds());
        state.misfits.push_back(g.misfit);
        state.iteration_seconds.push_back(record.iteration_seconds.back());
        ++state.iterations_done;
        if (record.first_gradient.empty()) {
            record.first_gradient = g.gradient;
            record.first_misfit = g.misfit;
        }
        record.last_gradient = std::move(g.gradient);
        after_iteration(state, record);
    }
    return record;
}

// A propagator on the current GPU holding the observed data of `shots` only: each rank models just its
// own shots (the others' traces stay zero and are never read), so modelling the data scales too.
std::unique_ptr<GpuPropagator> propagator_for(const Problem& p, const ShotRange& shots) {
    auto gpu = std::make_unique<GpuPropagator>(p, true_model(p));
    gpu->require_gradient_fits();  // refuse now, not after modelling the data
    gpu->set_observed(gpu->observed_traces_of(shots.shots()));
    return gpu;
}

// Rank 0 reads the checkpoint and sends its bytes to every rank, so the folder need only be visible to
// rank 0 (no shared file system across nodes). Every rank checks it against its own flags.
FwiState starting_state(const Problem& p, const Options& o, int ranks) {
    if (o.resume.empty()) return FwiState{0, initial_model(p), {}, {}};
    std::string bytes;
    if (world_rank() == 0) bytes = encode_checkpoint(read_checkpoint(o.resume));
    uint64_t size = bytes.size();
    MPI_CHECK(MPI_Bcast(&size, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD));
    bytes.resize(size);
    MPI_CHECK(MPI_Bcast(bytes.data(), static_cast<int>(size), MPI_BYTE, 0, MPI_COMM_WORLD));  // < 2 GiB: models up to 16384^2
    const Checkpoint checkpoint = decode_checkpoint(bytes, checkpoint_path(o.resume));
    const std::string warning = check_resume(checkpoint, p, o.iterations, ranks);
    if (world_rank() == 0) {
        if (!warning.empty()) std::fprintf(stderr, "warning: %s\n", warning.c_str());
        std::printf("resuming from %s after iteration %d of %d\n", checkpoint_path(o.resume).c_str(),
                    checkpoint.state.iterations_done, o.iterations);
    }
    return checkpoint.state;
}

// How many ranks hold a model that differs from rank 0's (it must be none: the allreduce gives every rank
// the same bits and the update is deterministic).
int ranks_with_another_model(const std::vector<float>& velocity) {
    std::vector<float> root = velocity;
    MPI_CHECK(MPI_Bcast(root.data(), static_cast<int>(root.size()), MPI_FLOAT, 0, MPI_COMM_WORLD));
    const int differs = std::memcmp(root.data(), velocity.data(), velocity.size() * sizeof(float)) != 0;
    int count = 0;
    MPI_CHECK(MPI_Allreduce(&differs, &count, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    return count;
}

// "1e-05"
std::string short_number(double value) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", value);
    return text;
}

// "falls every iteration" or "rises at iteration 25, 27"
std::string misfit_trend(const std::vector<double>& misfits) {
    std::string rises;
    for (size_t i = 1; i < misfits.size(); ++i)
        if (misfits[i] > misfits[i - 1]) rises += (rises.empty() ? "" : ", ") + std::to_string(i + 1);
    return rises.empty() ? "falls every iteration" : "rises at iteration " + rises;
}

double relative_misfit(const FwiState& s) {
    return s.misfits.front() > 0.0 ? s.misfits.back() / s.misfits.front() : 1.0;
}

std::string shots_per_rank(int nshots, int ranks) {
    std::string text;
    for (int r = 0; r < ranks; ++r) text += (r ? ", " : "") + std::to_string(split_shots(nshots, ranks, r).count);
    return text;
}

// Rank 0's part of every iteration: progress, snapshots, checkpoints.
AfterIteration report_and_save(const Problem& p, const Options& o, int ranks) {
    return [&p, &o, ranks](const FwiState& s, const LoopRecord& r) {
        const int remaining = o.iterations - s.iterations_done;
        std::printf("iteration %3d/%d  misfit %.6e (%.4f of first)  gradient %7.2f ms (combine %5.2f ms)  "
                    "iteration %7.2f ms  ETA %.1f s\n",
                    s.iterations_done, o.iterations, s.misfits.back(), relative_misfit(s),
                    1e3 * r.gradient_seconds.back(), 1e3 * r.combine_seconds.back(), 1e3 * r.iteration_seconds.back(),
                    median(r.iteration_seconds) * remaining);
        if (o.save_every > 0 && s.iterations_done % o.save_every == 0) {
            write_model_npy(p, o.out, snapshot_file_name(s.iterations_done), s.velocity);
            write_loss_history(o.out, s);
        }
        if (o.checkpoint_every > 0 && (s.iterations_done % o.checkpoint_every == 0 || remaining == 0)) {
            write_checkpoint(o.out, Checkpoint{s, problem_fingerprint(p), ranks});
            std::printf("checkpoint: iteration %d written to %s\n", s.iterations_done, checkpoint_path(o.out).c_str());
            if (s.iterations_done == o.kill_after_checkpoint) {
                std::printf("--kill-after-checkpoint %d: rank 0 kills itself (SIGKILL) to test --resume\n",
                            o.kill_after_checkpoint);
                std::fflush(stdout);
                std::raise(SIGKILL);
            }
        }
        std::fflush(stdout);
    };
}

struct ReferenceCheck {
    double gradient_seconds = 0.0;  // 1 GPU, median
    double gradient_rel_diff = 0.0, misfit_rel_diff = 0.0, model_rel_diff = 0.0;
    std::vector<double> misfits;  // the reference's history
    bool gradient_passed = false, model_passed = false;
};

// The single-GPU run of the same iterations from the same start, on rank 0's GPU, timed the same way.
ReferenceCheck run_reference(const Problem& p, const FwiState& start, int iterations, const LoopRecord& parallel,
                             const std::vector<float>& final_velocity) {
    std::printf("reference: the same %d iterations on one GPU, all shots (--no-reference skips this)\n",
                iterations - start.iterations_done);
    std::fflush(stdout);
    FwiState state = start;
    const auto gpu = propagator_for(p, ShotRange{0, p.nshots});
    const LoopRecord reference = run_iterations(
        p, *gpu, all_shots(p.nshots), [](GradientResult&, double local_seconds, int) { return local_seconds; },
        state, iterations,
        [](const FwiState&, const LoopRecord&) {});
    ReferenceCheck check;
    check.gradient_seconds = median(reference.gradient_seconds);
    check.misfits = state.misfits;
    check.gradient_rel_diff = compare(parallel.first_gradient, reference.first_gradient).relative_l2;
    check.misfit_rel_diff = std::abs(parallel.first_misfit - reference.first_misfit) /
                            std::max(std::abs(reference.first_misfit), 1e-300);
    const Difference model = compare(final_velocity, state.velocity);
    check.model_rel_diff = model.relative_l2;
    check.gradient_passed = check.gradient_rel_diff <= kGradientTolerance && check.misfit_rel_diff <= kGradientTolerance;
    check.model_passed = check.model_rel_diff <= kModelTolerance;
    std::printf("reference: first gradient rel diff %.1e, first misfit rel diff %.1e (tolerance %.0e); "
                "final model %s (tolerance %.0e)\n",
                check.gradient_rel_diff, check.misfit_rel_diff, kGradientTolerance, describe(model).c_str(),
                kModelTolerance);
    return check;
}

void write_start_files(const Problem& p, const Options& o) {
    write_model_npy(p, o.out, "true_model.npy", true_model(p));
    write_model_npy(p, o.out, "initial_model.npy", initial_model(p));
}

void write_final_files(const Problem& p, const Options& o, const FwiState& state, const LoopRecord& record) {
    write_model_npy(p, o.out, "final_model.npy", state.velocity);
    write_model_npy(p, o.out, "first_gradient.npy", record.first_gradient);
    write_model_npy(p, o.out, "final_gradient.npy", record.last_gradient);
    write_loss_history(o.out, state);
    const std::string snapshots =
        o.save_every > 0 ? "the model every " + std::to_string(o.save_every) + " iterations, " : std::string();
    std::printf("wrote the true, initial and final model, %sthe first and final gradient and the loss history "
                "(.csv, .json) to %s/\n",
                snapshots.c_str(), o.out.c_str());
}

int run_fwi(const Problem& p, const Options& o) {
    const int ranks = world_size(), rank = world_rank();
    const ShotRange mine = split_shots(p.nshots, ranks, rank);
    check_option_combinations(o);
    FwiState state = starting_state(p, o, ranks);
    const FwiState start = state;
    if (rank == 0) make_directories(o.out);

    // Everything above runs without a GPU, so bad input is refused before any device is touched.
    const int device = select_gpu_for_rank(MPI_COMM_WORLD, GpuSharing::refuse);
    if (rank == 0)
        std::printf("06_fwi_shot_parallel: %s, %d iterations on %d rank%s, one GPU each (%s); rank 0 on %s\n"
                    "shots per rank: %s\n",
                    p.summary().c_str(), o.iterations, ranks, ranks > 1 ? "s" : "", nccl_version_string().c_str(),
                    describe_device(device).c_str(), shots_per_rank(p.nshots, ranks).c_str());

    LoopRecord record;
    {
        const auto gpu = propagator_for(p, mine);
        if (rank == 0) {
            std::printf("memory (rank 0): %s\n", gpu->memory_report().c_str());
            write_start_files(p, o);
        }
        NcclSum sum(p.model_cells(), o.timeout);
        const AfterIteration after = rank == 0 ? report_and_save(p, o, ranks) : [](const FwiState&, const LoopRecord&) {};
        record = run_iterations(p, *gpu, mine.shots(), std::ref(sum), state, o.iterations, after);
        sum.close();
    }  // frees this rank's GPU memory before the reference
    const int differing_ranks = ranks_with_another_model(state.velocity);
    if (rank != 0) return kExitOk;

    write_final_files(p, o, state, record);
    const ReferenceCheck reference =
        o.no_reference ? ReferenceCheck{} : run_reference(p, start, o.iterations, record, state.velocity);

    const double gradient_time = median(record.gradient_seconds), iteration_time = median(record.iteration_seconds);
    const double combine_time = median(record.combine_seconds);
    const double speedup = reference.gradient_seconds / gradient_time;
    const bool decreased = state.misfits.size() < 2 || state.misfits.back() < state.misfits.front();
    const bool verified =
        differing_ranks == 0 && decreased && (o.no_reference || (reference.gradient_passed && reference.model_passed));
    const int run_iterations_here = o.iterations - start.iterations_done;

    if (o.no_reference)
        std::printf("%s: %d GPU%s: %.4f s per gradient (median of %d; no 1-GPU reference: --no-reference)\n",
                    p.summary().c_str(), ranks, ranks > 1 ? "s" : "", gradient_time, run_iterations_here);
    else
        std::printf("%s: 1 GPU: %.4f s, %d GPU%s: %.4f s, speedup: %.2f, efficiency: %.0f%%, grad rel diff: %.0e\n",
                    p.summary().c_str(), reference.gradient_seconds, ranks, ranks > 1 ? "s" : "", gradient_time,
                    speedup, 100.0 * speedup / ranks, reference.gradient_rel_diff);
    std::printf("combine (NCCL allreduce with its copies): %.3f ms per iteration, %.1f%% of the iteration; "
                "misfit %.4e -> %.4e (%.4f of first)\n",
                1e3 * combine_time, 100.0 * combine_time / iteration_time, state.misfits.front(), state.misfits.back(),
                relative_misfit(state));

    JsonObject result;
    result.add("pattern", "06_fwi_shot_parallel")
        .add("variant", "")
        .add("gpus", ranks)
        .add("ranks", ranks)
        .add("problem", p.name)
        .add("grid", std::to_string(p.nz) + "x" + std::to_string(p.nx))
        .add("shots", p.nshots)
        .add("nt", p.nt)
        .add("iterations", run_iterations_here)
        .add("first_iteration", start.iterations_done + 1)
        .add("time_per_gradient_s", gradient_time)
        .add("time_per_iteration_s", iteration_time)
        .add("combine_s", combine_time)
        .add("combine_share", combine_time / iteration_time);
    if (!o.no_reference)
        result.add("reference_time_per_gradient_s", reference.gradient_seconds)
            .add("speedup", speedup)
            .add("efficiency", speedup / ranks)
            .add("grad_rel_diff", reference.gradient_rel_diff)
            .add("misfit_rel_diff", reference.misfit_rel_diff)
            .add("model_rel_diff", reference.model_rel_diff);
    result.add("misfit_first", state.misfits.front())
        .add("misfit_final", state.misfits.back())
        .add("ranks_with_another_model", differing_ranks)
        .add("nccl", nccl_version_string())
        .add("verified", verified);
    emit_result(result, o.json);

    if (differing_ranks > 0)
        throw VerificationError(std::to_string(differing_ranks) + " rank(s) ended with a model other than rank 0's");
    if (!decreased) throw VerificationError("the misfit did not decrease over the iterations");
    if (!o.no_reference && !reference.gradient_passed)
        throw VerificationError("the first gradient or misfit differs from the single-GPU run beyond " +
                                short_number(kGradientTolerance) + ": the combine is wrong");
    if (!o.no_reference && !reference.model_passed)
        throw VerificationError(
            "the first gradient matches the single-GPU run, but the final model differs beyond " +
            short_number(kModelTolerance) + " after " + std::to_string(run_iterations_here) +
            " iterations. If the misfit stopped falling every iteration (reference: " +
            misfit_trend(reference.misfits) + "), the fixed-size update overshoots and amplifies float rounding "
            "each iteration, and the two runs part ways; check long runs by their first gradient (fewer "
            "--iterations) or run them with --no-reference");
    std::printf("verified: every rank holds the same model%s\n",
                o.no_reference ? "" : "; first gradient and final model match the single-GPU run");
    return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
    std::string pictures_dir;  // set on rank 0 when the run succeeded and wants pictures
    const int code = run_mpi_program("06_fwi_shot_parallel", argc, argv, [&]() -> int {
        Problem problem = preset_from_args(argc, argv);
        Options options;
        ArgParser parser("06_fwi_shot_parallel",
                         "Full-waveform inversion over MPI ranks, one GPU each, gradients summed with NCCL.\n"
                         "Run with mpirun -np N (N <= shots; one GPU per rank).");
        add_problem_flags(parser, problem);
        parser.add_int("--iterations", &options.iterations, 1, 100000, "FWI iterations (in all, resumed ones included)");
        parser.add_string("--out", &options.out, "folder for models, gradients, loss history, pictures, checkpoints");
        parser.add_int("--save-every", &options.save_every, 0, 100000, "write the model every N iterations (0: never)");
        parser.add_int("--checkpoint-every", &options.checkpoint_every, 0, 100000,
                       "write a checkpoint to --out every N iterations and at the end (0: never)");
        parser.add_string("--resume", &options.resume, "continue from the checkpoint in this folder");
        parser.add_double("--timeout", &options.timeout, 1.0, 86400.0,
                          "seconds to wait for NCCL (communicator creation, each allreduce) before giving up");
        parser.add_switch("--no-reference", &options.no_reference,
                          "skip the single-GPU run of the same iterations on rank 0 (no speedup, no check)");
        parser.add_switch("--no-plots", &options.no_plots, "do not draw the PNG pictures");
        parser.add_string("--json", &options.json, "also write the RESULT object to this file");
        parser.add_int("--kill-after-checkpoint", &options.kill_after_checkpoint, 0, 100000,
                       "testing: rank 0 SIGKILLs itself right after writing this iteration's checkpoint");
        if (!parser.parse(argc, argv)) return kExitOk;
        validate(problem);
        const int status = run_fwi(problem, options);
        if (world_rank() == 0 && !options.no_plots) pictures_dir = options.out;
        return status;
    });
    // After MPI_Finalize: starting a process from inside an MPI job is not portable.
    if (code == kExitOk && !pictures_dir.empty()) draw_pictures(FWI_PLOT_SCRIPT, pictures_dir);
    return code;
}
