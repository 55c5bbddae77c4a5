// 03_host_staged_mpi: one MPI rank per GPU; the ranks' gradients are summed through host memory.
//
// Purpose: the portable multi-GPU pattern, which works with any MPI. Every rank drives one GPU and
// computes the misfit and gradient of its share of the shots; the gradient is copied to the host,
// summed over the ranks with MPI_Allreduce, and copied back; every rank then makes the same model
// update on its GPU. The SUM of the ranks' gradients is the gradient over all shots, so every iteration
// equals 01_single_gpu's up to float rounding.
// What you learn: one GPU per rank from the node-local rank; what staging through the host costs
// (device-to-host copy, MPI, host-to-device copy: the three steps of combine_whole in
// combine_steps.cpp); that pinned memory makes the copies fast, but not MPI's sum; that a chunked pipeline
// gains mostly because MPI sums chunks of 1 MiB faster than one large buffer, while overlapping the copies
// with it adds little (README, "The pipeline"); what a CUDA-aware MPI changes.
// --combine picks the variants: pageable, pinned, pipelined, cuda_aware (only where MPI reports CUDA
// support), or all.
// How it works: every rank runs the loop of common/shot_parallel.hpp (compute, wait, combine, update)
// once per variant; every combine is behind DeviceCombine (device_combine.cu), its host logic in
// combine_steps.cpp; launch.cpp holds the flags and the variants table; bench.cpp is --bench-allreduce.
// What you should see (mpirun -np N on N GPUs; the README's sample has 4): per variant a line per
// iteration, the speedup line against the 1-GPU reference run by rank 0 and a RESULT line; with two or
// more variants a table of them with their copy and MPI times; "cuda_aware: skipped: ..." where MPI is
// not CUDA-aware.
#include <cuda_runtime.h>
#include <mpi.h>

#include <cstdio>
#include <string>
#include <vector>

#include "cuda_check.hpp"
#include "device.hpp"
#include "device_combine.hpp"
#include "errors.hpp"
#include "launch.hpp"
#include "mpi_check.hpp"
#include "mpi_env.hpp"
#include "mpi_team.hpp"
#include "output.hpp"
#include "shot_parallel.hpp"
#include "timing.hpp"

using namespace fwi;

namespace {

// Where one iteration's combine went (the lesson's own figures, beside the common phases).
struct StagingTimes {
    std::vector<double> to_host, mpi, to_device;
};

// ---- the combine: through host memory ------------------------------------------------------------

// Every variant: the gradient through DeviceCombine (pageable and pinned: the three steps of combine_whole
// in combine_steps.cpp; pipelined: chunks whose copies and MPI overlap; cuda_aware: the device pointer
// handed to MPI), then the misfit, 8 bytes, the simple way. --bench-allreduce runs the same DeviceCombine,
// and the CPU tests the same combine steps (with a host buffer standing in for the GPU's).
void combine_gradient_and_misfit(DeviceCombine& combine, GpuShare& share, StagingTimes& times, double timeout_s) {
    double misfit = share.download_misfit();  // compute() returned with the gradient and the misfit complete
    {
        WaitTimeout guard("the combine of the gradient and the misfit (copies and MPI_Allreduce)", timeout_s);
        const CombineTimes t = combine.combine(share.gradient_count());
        MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &misfit, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
        times.to_host.push_back(t.to_host);
        times.mpi.push_back(t.mpi);
        times.to_device.push_back(t.to_device);
    }
    share.upload_misfit(misfit, "the copy of the combined misfit");
}

// ---- one variant's FWI run -------------------------------------------------------------------------

// What every variant's run shares.
struct VariantContext {
    const Problem& problem;
    const Options& options;
    int gpus;
    GpuShare& share;
    MpiTeam& team;
};

// One variant's run as rank 0 reports it: its line in the table and its summary.
struct VariantRun {
    VariantLine line;
    RunSummary summary;
};

// Runs the FWI loop with one variant's combine.
VariantRun run_variant(VariantContext& context, const VariantSpec& spec) {
    const int rank = world_rank();
    VariantLine line{spec.label()};
    DeviceCombine device_combine(spec, context.share.device_gradient(), context.share.gradient_count(), MPI_COMM_WORLD,
                                 context.options.timeout_s);
    if (!device_combine.unavailable_reason().empty()) {
        if (rank == 0)
            std::printf("\n%s: skipped: %s\n", spec.label().c_str(), device_combine.unavailable_reason().c_str());
        line.skipped = true;
        return {line, {}};
    }
    if (rank == 0) std::printf("\n== %s: %s\n", spec.label().c_str(), spec.description().c_str());

    StagingTimes times;
    const CombineStep combine = [&](GpuShare& share, int iteration) {
        combine_gradient_and_misfit(device_combine, share, times, context.options.timeout_s);
        if (iteration == kWarmUpCombine) times = {};  // run_iterations times only the iterations' combines
    };
    context.share.set_model(
        initial_model(context.problem));  // every variant starts from it: the previous one changed the model
    const MemberRecord record =
        run_iterations(context.team, rank, context.share, combine, kFirstIteration, context.options.iterations);
    RunSummary run = summarize(context.team, rank, record, "03_host_staged_mpi", spec.name, kFirstIteration);
    if (rank != 0) return {line, run};

    run.gpus = context.gpus;  // ranks may share a GPU (a test on a 1-GPU machine)
    line.per_gradient_s = run.time_per_gradient;
    line.combine_s = run.combine.median;
    line.combine_share = run.combine.median / run.time_per_iteration;
    line.to_host_s = median(times.to_host);
    line.mpi_s = median(times.mpi);
    line.to_device_s = median(times.to_device);
    run.details.add("to_host_s", line.to_host_s).add("mpi_s", line.mpi_s).add("to_device_s", line.to_device_s);
    if (spec.name == "pipelined") run.details.add("chunk_kb", spec.chunk_kb).add("in_flight", spec.pipeline.in_flight);
    return {line, run};
}

// Rank 0, after every variant's run: the single-GPU reference on its share (when `with_reference`), then
// each variant's check and report, and the table of variants.
void check_and_report(const Problem& p, const Options& o, GpuShare& share, bool with_reference,
                      std::vector<VariantRun>& runs) {
    const ReferenceRun reference =
        with_reference ? run_reference(share, initial_model(p), o.iterations) : ReferenceRun{};
    std::vector<VariantLine> lines;
    std::string failed;
    for (VariantRun& run : runs) {
        if (!run.line.skipped) {
            std::printf("\n== %s\n", run.line.label.c_str());
            try {
                // --json keeps the last variant's RESULT, or the first failed one's: the file never says
                // "verified": true of a run that exits 1.
                report(p, run.summary, with_reference ? &reference : nullptr, failed.empty() ? o.json : "");
                run.line.verified = true;
            } catch (const VerificationError& error) {  // reported; the other variants still are
                std::printf("verification FAILED: %s\n", error.what());
                failed += (failed.empty() ? "" : ", ") + run.line.label;
            }
        }
        lines.push_back(run.line);
    }
    if (lines.size() > 1)
        print_variant_table(lines, share.gradient_count() * sizeof(float), world_size(), o.iterations);
    if (!failed.empty()) throw VerificationError("variant(s) " + failed + " failed verification (see above)");
}

int run_fwi(const Problem& p, const Options& o, const std::vector<VariantSpec>& specs, const ShotRange& mine,
            int gpus) {
    const int rank = world_rank();
    const bool with_reference = rank == 0 && !o.no_reference;
    MpiTeam team(MPI_COMM_WORLD, o.timeout_s);
    const HostTimer setup_timer;
    GpuShare share(p, mine, initial_model(p), with_reference ? Observed::all_shots : Observed::own_shots);
    if (rank == 0) std::printf("memory (rank 0): %s\n", share.propagator().memory_report().c_str());
    team.wait_for_member0_setup(rank, setup_timer.seconds());
    const HostTimer run_timer;
    VariantContext context{p, o, gpus, share, team};
    std::vector<VariantRun> runs;
    for (const VariantSpec& spec : specs) runs.push_back(run_variant(context, spec));
    const double run_seconds = run_timer.seconds();
    if (rank == 0) check_and_report(p, o, share, with_reference, runs);
    wait_for_rank0_to_finish(run_seconds, o.timeout_s);  // the other ranks wait for rank 0's reference
    return kExitOk;
}

int run(int argc, char** argv) {
    const int rank = world_rank(), ranks = world_size();
    Problem problem = preset_from_args(argc, argv);
    Options o;
    if (!parse_options(argc, argv, problem, o)) return kExitOk;
    const std::vector<VariantSpec> specs = variant_specs(o.combine, o.chunk_kb, o.in_flight);
    const ShotRange mine =
        o.bench ? ShotRange{} : split_shots(problem.nshots, ranks, rank);  // more ranks than shots: exit 2
    if (rank == 0) check_writable(o.json, "--json");  // written at the end: refused now, not after the run
    require_named_variants_available(o, specs);       // exit 3, after the usage errors (exit 2)

    if (o.skip_without_gpus && too_few_gpus_anywhere(o.timeout_s)) {
        if (rank == 0) std::printf("skipped: a node has more ranks than visible GPUs (--skip-without-gpus)\n");
        return kExitSkipped;
    }
    const int device = select_gpu_for_rank(MPI_COMM_WORLD, GpuSharing::warn, o.timeout_s);
    if (rank == 0)
        std::printf("03_host_staged_mpi: %d rank(s), %s\n", ranks,
                    o.bench ? "--bench-allreduce" : problem.summary().c_str());
    const std::string shots_text = o.bench ? "" : ", shots " + mine.text();
    const int gpus = print_rank_placement(device, shots_text, o.timeout_s);
    if (o.bench) {
        require_sweep_fits(allreduce_sweep_sizes(o.sweep).back(), 2, device_memory_bytes(device),
                           "a buffer to sum in and one of this rank's inputs on every GPU",
                           "GPU " + std::to_string(device) + "'s");
        return run_bench_allreduce(specs, o.sweep, gpus, o.timeout_s, o.json);
    }
    return run_fwi(problem, o, specs, mine, gpus);
}

}  // namespace

// run_mpi_program (common/mpi_env.hpp): MPI_Init, run(), MPI_Finalize; a rank that throws ends the whole job
// (MPI_Abort) with the exception's exit code.
int main(int argc, char** argv) {
    return run_mpi_program("03_host_staged_mpi", argc, argv, [&] { return run(argc, argv); });
}
