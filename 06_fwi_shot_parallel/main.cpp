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
// What you should see: the misfit falling every iteration, the time per iteration well under one GPU's
// (though not 1/N of it: the README says why), the check against the single-GPU run of the same
// iterations (first gradient and final model), the speedup line and a RESULT line; in --out the models,
// the loss history and PNG pictures of them.
#include <mpi.h>
#include <nccl.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "checkpoint.hpp"
#include "device.hpp"
#include "errors.hpp"
#include "host_memory.hpp"
#include "model_checks.hpp"
#include "mpi_check.hpp"
#include "mpi_env.hpp"
#include "mpi_team.hpp"
#include "nccl_combine.hpp"
#include "nccl_comm.hpp"
#include "nccl_mpi.hpp"
#include "output.hpp"
#include "problem.hpp"
#include "run_files.hpp"
#include "shot_parallel.hpp"
#include "shot_split.hpp"
#include "timing.hpp"

using namespace fwi;

namespace {

struct Options : ShotParallelOptions {
    Options() { iterations = 20; }
    int save_every = 5;
    int checkpoint_every = 0;
    int kill_after_checkpoint = 0;
    std::string out = "out/06_fwi_shot_parallel";
    std::string resume;
    bool overwrite = false;
    bool no_plots = false;
    std::string transport = "auto";
};

// ---- the combine -----------------------------------------------------------------------------------

// The combine is 05's: nccl_sum (common/nccl_combine.hpp), one NCCL group of two allreduces in device
// memory, waited for with --timeout.

// ---- a long run: resume, progress files, checkpoints ---------------------------------------------

// Flags that are fine alone but not together; checked before any GPU is touched. (The parser refused
// --kill-after-checkpoint without --checkpoint-every, so checkpoint_every is positive here.)
void check_option_combinations(const Options& o) {
    if (o.kill_after_checkpoint == 0) return;
    if (o.kill_after_checkpoint % o.checkpoint_every != 0 || o.kill_after_checkpoint >= o.iterations)
        throw UsageError("--kill-after-checkpoint: " + std::to_string(o.kill_after_checkpoint) +
                         " must be a multiple of --checkpoint-every (" + std::to_string(o.checkpoint_every) +
                         ") below --iterations (" + std::to_string(o.iterations) + ")");
}

// Whether --resume continues the run in its own folder, --out.
bool resumes_in_out(const Options& o) {
    std::error_code ignored;
    return !o.resume.empty() && std::filesystem::equivalent(o.resume, o.out, ignored);
}

// A checkpoint in --out is the only way to continue a long run: a fresh run (or one resumed from another
// folder) would replace it at its first checkpoint, and its loss history and models at once. Rank 0 (the
// one that writes --out) refuses that unless the user says so (--overwrite: the old checkpoint is removed
// when the run writes its first files, so that it never stands beside another run's), and refuses
// --overwrite of the checkpoint that --resume continues from. A run that continues in the same folder keeps
// checkpointing: without --checkpoint-every its newer models and loss history would stand beside the old
// checkpoint, and a later --resume would go back to it and replace them.
void check_checkpoint_kept(const Options& o) {
    const std::string existing = checkpoint_path(o.out);
    std::error_code ignored;
    const bool resumes_out = resumes_in_out(o);
    if (o.overwrite && resumes_out)
        throw UsageError(
            "--overwrite: it would delete the checkpoint that --resume " + shown_path(o.resume) +
            " continues from (--out " + shown_path(o.out) +
            " is the same folder); leave out --overwrite to continue that run, or --resume to start afresh");
    if (resumes_out && o.checkpoint_every == 0 && std::filesystem::exists(existing, ignored))
        throw UsageError("--resume " + shown_path(o.resume) +
                         " continues in its own folder (--out), where its checkpoint would stay behind the newer "
                         "models and loss history without --checkpoint-every; give --checkpoint-every N, or "
                         "another --out");
    if (o.overwrite || resumes_out || !std::filesystem::exists(existing, ignored)) return;
    throw UsageError("--out: '" + shown_path(o.out) + "' holds a checkpoint (" + shown_path(existing) +
                     ") that this run would overwrite; continue it with --resume " + shown_path(o.out) +
                     ", choose another --out, or give --overwrite to start afresh over it");
}

// --overwrite's removal of the old checkpoint, once every rank is set up (check_run_files_replaceable made
// sure it is a file).
void remove_old_checkpoint(const std::string& out) {
    std::error_code error;
    std::filesystem::remove(checkpoint_path(out), error);
    if (error)
        throw EnvironmentError("--overwrite: cannot remove the old checkpoint '" + shown_path(checkpoint_path(out)) +
                               "': " + error.message());
}

// Rank 0's work on files (the checkpoint read, the files written) while the other ranks wait for it under
// --timeout: its own, shorter limit names a stalled file system here, before they blame "another rank".
WaitTimeout file_system_guard(const std::string& what, double timeout_s) {
    return WaitTimeout(what, 0.8 * timeout_s, kFileSystemCause);
}

// Rank 0 reads the checkpoint and sends its bytes to every rank, so the folder need only be visible to
// rank 0 (no shared file system across nodes). Every rank checks it against its own flags.
FwiState starting_state(const Problem& p, const Options& o, int ranks) {
    if (o.resume.empty()) return FwiState{0, initial_model(p), {}, {}};
    std::string bytes;
    {
        // A file on a stalled network file system, or a rank that never reaches the broadcasts (launched
        // with other flags), would leave the ranks waiting forever.
        const WaitTimeout guard("the checkpoint " + checkpoint_path(o.resume) + " (read by rank 0, sent to every rank)",
                                o.timeout_s);
        // read_checkpoint refuses a file larger than this problem's checkpoint can be: at most 16384^2 floats
        // and a few MiB, so the count fits MPI's int.
        if (world_rank() == 0) {
            const WaitTimeout read_guard =
                file_system_guard("reading the checkpoint " + checkpoint_path(o.resume), o.timeout_s);
            bytes = encode_checkpoint(read_checkpoint(o.resume, largest_checkpoint_bytes(p)));
        }
        uint64_t size = bytes.size();
        MPI_CHECK(MPI_Bcast(&size, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD));
        bytes.resize(size);
        MPI_CHECK(MPI_Bcast(bytes.data(), static_cast<int>(size), MPI_BYTE, 0, MPI_COMM_WORLD));
    }
    const Checkpoint checkpoint = decode_checkpoint(bytes, checkpoint_path(o.resume));
    const std::string warning = check_resume(checkpoint, checkpoint_path(o.resume), p, o.iterations, ranks);
    if (world_rank() == 0 && !warning.empty()) print_warning(warning);
    return checkpoint.state;
}

// Rank 0's part of every iteration: the loss history, model snapshots and checkpoints. The model is
// copied to the host only on the iterations that write it.
AfterIteration save_progress(const Problem& p, const Options& o, int ranks, FwiState& state) {
    return [&p, &o, ranks, &state](const IterationDone& done) {
        state.iterations_done = done.iteration;
        state.misfits.push_back(done.misfit);
        state.iteration_seconds.push_back(done.phases.iteration_seconds());
        const bool snapshot = o.save_every > 0 && done.iteration % o.save_every == 0;
        const bool checkpoint =
            o.checkpoint_every > 0 && (done.iteration % o.checkpoint_every == 0 || done.iteration == o.iterations);
        if (!snapshot && !checkpoint) return;
        // (The other ranks wait for these files at the next iteration's start.)
        const WaitTimeout writes_guard =
            file_system_guard("this iteration's files in --out " + shown_path(o.out), o.timeout_s);
        state.velocity = done.share.download_model();
        require_finite_model(p, state.velocity, done.iteration);  // never save a diverged model
        if (snapshot) {
            write_model_npy(p, o.out, snapshot_file_name(done.iteration), state.velocity);
            write_loss_history(o.out, state);
        }
        if (checkpoint) {
            write_checkpoint(o.out, Checkpoint{state, problem_fingerprint(p), ranks});
            std::printf("checkpoint: iteration %d written to %s\n", done.iteration, checkpoint_path(o.out).c_str());
            if (done.iteration == o.kill_after_checkpoint) {
                std::printf("--kill-after-checkpoint %d: rank 0 kills itself (SIGKILL) to test --resume\n",
                            o.kill_after_checkpoint);
                std::fflush(stdout);
                std::raise(SIGKILL);
            }
        }
        std::fflush(stdout);
    };
}

// The run's first changes to --out, once every rank is set up: --overwrite's removal of the old checkpoint,
// the snapshots this run replaces, and the true and initial models.
void write_first_files(const Problem& p, const Options& o, int iterations_done) {
    // (The other ranks wait for them at run_iterations' first barrier, "the other GPUs' set-up".)
    const WaitTimeout writes_guard = file_system_guard("the first files in --out " + shown_path(o.out), o.timeout_s);
    if (o.overwrite) remove_old_checkpoint(o.out);  // see check_checkpoint_kept
    // Snapshots at or before the start are this run's only in the folder it continues.
    remove_snapshots_after(o.out, resumes_in_out(o) ? iterations_done : 0);
    write_model_npy(p, o.out, "true_model.npy", true_model(p));
    write_model_npy(p, o.out, "initial_model.npy", initial_model(p));
}

void write_final_files(const Problem& p, const Options& o, const FwiState& state, const MemberRecord& record,
                       int first_iteration) {
    // (The other ranks wait for them in wait_for_rank0_to_finish.)
    const WaitTimeout writes_guard = file_system_guard("the final files in --out " + shown_path(o.out), o.timeout_s);
    write_model_npy(p, o.out, "final_model.npy", state.velocity);
    write_model_npy(p, o.out, "first_gradient.npy", record.first_gradient);
    write_model_npy(p, o.out, "final_gradient.npy", record.final_gradient);
    write_loss_history(o.out, state);
    // This run wrote snapshots when one of its iterations was a multiple of --save-every: the last such
    // iteration is at or after its first.
    const int last_snapshot = o.save_every > 0 ? o.iterations - o.iterations % o.save_every : 0;
    const bool snapshots_written = o.save_every > 0 && last_snapshot >= first_iteration;
    const std::string snapshots =
        snapshots_written
            ? "the model every " + (o.save_every == 1 ? "iteration" : count_of(o.save_every, "iteration")) + ", "
            : std::string();
    std::printf(
        "wrote the true, initial and final model, %sthe first and final gradient and the loss history (.csv, .json) to "
        "%s/\n",
        snapshots.c_str(), o.out.c_str());
}

// ---- the run -----------------------------------------------------------------------------------------

int run_fwi(const Problem& p, const Options& o) {
    // 1. Shots, resume state and output folder: everything that can be refused before a GPU is touched.
    //    The transport goes into the environment on every rank, before NCCL starts.
    const int ranks = world_size(), rank = world_rank();
    const std::string transport = apply_nccl_transport(o.transport);
    const ShotRange mine = split_shots(p.nshots, ranks, rank);
    check_option_combinations(o);
    if (rank == 0) {
        // What the run writes into --out at its end must be replaceable: refused now, not after the run.
        check_run_files_replaceable(o.out, run_file_names(o.out), "--out");
        check_checkpoint_kept(o);
    }
    FwiState state = starting_state(p, o, ranks);
    const FwiState start = state;
    if (o.kill_after_checkpoint > 0 && o.kill_after_checkpoint <= start.iterations_done)
        throw UsageError("--kill-after-checkpoint: " + std::to_string(o.kill_after_checkpoint) +
                         " is not after the checkpoint's " + std::to_string(start.iterations_done) +
                         " iterations, so it would never fire; allowed a multiple of --checkpoint-every after " +
                         std::to_string(start.iterations_done) + " and below --iterations");
    if (rank == 0) {
        // --out made (where missing) and written to as a check, then removed again until every rank is set
        // up: a rank that fails before then ends the job at once (MPI_Abort), rank 0 with it, and a folder
        // made now would stay behind. (The barrier below keeps the others from their set-up meanwhile.)
        const OutputFolder out_check(o.out);
        check_writable(o.json, "--json");  // written at the end: refused now, not after the run
        check_not_a_run_file(o.json, "--json", o.out, "--out");
        check_not_a_run_file(o.json, "--json", o.resume, "--resume");
        if (!o.resume.empty())  // said once the flags can no longer be refused
            std::printf("resuming from %s after iteration %d of %d\n", checkpoint_path(o.resume).c_str(),
                        start.iterations_done, o.iterations);
    }
    barrier_with_timeout(MPI_COMM_WORLD, "rank 0's check of --out and --json", o.timeout_s);

    // 2. One GPU per rank, from the node-local rank.
    const int device = select_gpu_for_rank(MPI_COMM_WORLD, GpuSharing::refuse, o.timeout_s);
    if (rank == 0)
        std::printf("06_fwi_shot_parallel: %s, %s on %s, one GPU each (%s)\n%s\n", p.summary().c_str(),
                    count_of(o.iterations, "iteration").c_str(), count_of(ranks, "rank").c_str(),
                    nccl_version_string().c_str(), transport.c_str());
    print_rank_placement(device, ", shots " + mine.text(), o.timeout_s);
    // 3. This rank's share of the shots (rank 0's with every shot's data, for the reference).
    const bool with_reference = rank == 0 && !o.no_reference;
    MpiTeam team(MPI_COMM_WORLD, o.timeout_s);
    const HostTimer setup_timer;
    GpuShare share(p, mine, state.velocity, with_reference ? Observed::all_shots : Observed::own_shots);
    if (rank == 0) std::printf("memory (rank 0): %s\n", share.propagator().memory_report().c_str());
    team.wait_for_member0_setup(rank, setup_timer.seconds());

    // 4. NCCL bootstrapped over MPI, as in 05. Only then does rank 0 make or change --out: a run that fails
    //    in its set-up (no GPU, another rank out of memory, NCCL) leaves the folder as it was, or missing.
    const ncclComm_t comm = nccl_bootstrap_over_mpi(MPI_COMM_WORLD, o.timeout_s, o.timeout_s);
    if (rank == 0) {
        OutputFolder out_folder(o.out);  // removed again if the first files fail
        write_first_files(p, o, start.iterations_done);
        out_folder.keep();
    }

    // 5. The FWI loop from where the checkpoint left it (iteration 1 without one); the combine is one NCCL
    //    allreduce.
    const int first_iteration = start.iterations_done + 1;
    const CombineStep combine = [&](GpuShare& gpu_share, int) { nccl_sum(gpu_share, comm, o.timeout_s); };
    const HostTimer run_timer;
    const MemberRecord record = run_iterations(team, rank, share, combine, first_iteration, o.iterations,
                                               rank == 0 ? save_progress(p, o, ranks, state) : AfterIteration());
    const RunSummary run = summarize(team, rank, record, "06_fwi_shot_parallel", "", first_iteration);
    nccl_destroy_all({comm}, o.timeout_s);
    const double run_seconds = run_timer.seconds();

    // 6. Rank 0: the files, the single-GPU run of the same iterations, the check and the report; the others
    //    wait.
    if (rank == 0) {
        state.velocity = record.final_model;
        write_final_files(p, o, state, record, first_iteration);
        const ReferenceRun reference = with_reference
                                           ? run_reference(share, start.velocity, o.iterations - start.iterations_done)
                                           : ReferenceRun{};
        const WaitTimeout report_guard = file_system_guard("the report (--json)", o.timeout_s);
        report(p, run, with_reference ? &reference : nullptr, o.json);
    }
    wait_for_rank0_to_finish(run_seconds, o.timeout_s);
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
        add_shot_parallel_flags(parser, options);
        parser.add_string("--out", &options.out, "folder for models, gradients, loss history, pictures, checkpoints");
        parser.add_int("--save-every", &options.save_every, 0, 100000, "write the model every N iterations (0: never)");
        parser.add_int("--checkpoint-every", &options.checkpoint_every, 0, 100000,
                       "write a checkpoint to --out every N iterations and at the end (0: never)");
        parser.add_string("--resume", &options.resume, "continue from the checkpoint in this folder");
        parser.add_switch("--overwrite", &options.overwrite,
                          "start afresh even though --out holds a checkpoint (removed when the run starts)");
        parser.add_switch("--no-plots", &options.no_plots, "do not draw the PNG pictures");
        add_nccl_transport_flag(parser, options.transport);
        parser.add_int("--kill-after-checkpoint", &options.kill_after_checkpoint, 0, 100000,
                       "testing: rank 0 SIGKILLs itself right after writing this iteration's checkpoint");
        parser.add_used_only(
            {"--kill-after-checkpoint"}, [&options] { return options.checkpoint_every > 0; },
            "with --checkpoint-every above 0");
        parser.add_used_only(
            {"--save-every"}, [&options] { return options.save_every <= options.iterations; },
            "up to --iterations (a larger N never comes; 0 writes no snapshot)");
        if (!parser.parse(argc, argv)) return kExitOk;
        validate(problem, parser);
        require_host_memory(problem, ranks_on_this_node(options.timeout_s));
        const int status = run_fwi(problem, options);
        if (world_rank() == 0 && !options.no_plots) pictures_dir = options.out;
        return status;
    });
    // After MPI_Finalize: starting a process from inside an MPI job is not portable.
    if (code == kExitOk && !pictures_dir.empty())
        draw_pictures(plot_script_path(), pictures_dir, kPicturesTimeoutSeconds);
    return code;
}
