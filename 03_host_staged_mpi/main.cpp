// 03_host_staged_mpi: one MPI rank per GPU; the ranks' gradients are summed through host memory.
//
// Purpose: the portable multi-GPU pattern, which works with any MPI. Every rank drives one GPU and
// computes the misfit and gradient of its share of the shots; the gradient is copied to the host,
// summed over the ranks with MPI_Allreduce, and copied back; every rank then makes the same model
// update. The SUM of the ranks' gradients is the gradient over all shots (an average would be that sum
// divided by the number of ranks), so every iteration equals 01_single_gpu's up to float rounding.
// What you learn: one GPU per rank from the node-local rank; what staging through the host costs
// (device-to-host copy, MPI, host-to-device copy); how pinned memory and a chunked pipeline that
// overlaps the three cut it; what a CUDA-aware MPI would change. --combine picks the variants:
// pageable, pinned, pipelined, cuda_aware (only where MPI reports CUDA support), or all.
// How it works: combine_steps.cpp holds each variant's host logic (tested on the CPU), device_combine.cu
// its CUDA copies; this file is the FWI loop, the single-GPU reference and the report; bench.cpp is
// --bench-allreduce, the combine alone over a sweep of sizes in 02's table.
// What you should see (mpirun -np 4): per variant a line per iteration (compute, to-host, MPI,
// to-device, combine, update, total), the speedup line against the 1-GPU reference run by this binary,
// a RESULT line, and a comparison of the variants; "cuda_aware: skipped: ..." where MPI is not CUDA-aware.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "bench.hpp"
#include "cuda_check.hpp"
#include "device.hpp"
#include "device_combine.hpp"
#include "errors.hpp"
#include "gpu_propagator.hpp"
#include "mpi_check.hpp"
#include "mpi_env.hpp"
#include "nvtx.hpp"
#include "output.hpp"
#include "problem.hpp"
#include "rank_collectives.hpp"
#include "shot_split.hpp"
#include "timing.hpp"
#include "update.hpp"
#include "variants.hpp"
#include "verify.hpp"

using namespace fwi;

namespace {

// Gradient against the 1-GPU reference, and final model against the reference's: float32 sums over the
// same shots in another order (per rank, then across ranks) differ by float rounding, about 1e-7 to 1e-6
// relative L2; a lost or doubled shot or chunk differs by 1e-2 or more. Models across ranks: bit-identical.
constexpr double kTolerance = 1e-5;

struct Options {
    int iterations = 3;
    std::string combine = "all", chunk_kb = "1024", in_flight = "1";
    bool no_reference = false, bench = false, skip_without_gpus = false;
    double timeout_s = 300.0;
    std::string json;
    BenchSettings bench_settings;
};

// ---- set-up -----------------------------------------------------------------------------------------

bool parse_options(int argc, char** argv, Problem& problem, Options& o) {
    ArgParser parser("03_host_staged_mpi",
                     "One MPI rank per GPU (mpirun -np N); the gradients are summed through host memory.");
    add_problem_flags(parser, problem);
    parser.add_int("--iterations", &o.iterations, 1, 100000, "FWI iterations per variant");
    parser.add_string("--combine", &o.combine, "all, or a comma list of pageable, pinned, pipelined, cuda_aware");
    parser.add_string("--chunk-kb", &o.chunk_kb,
                      "pipelined: chunk size in KiB (" + std::to_string(kMinChunkKb) + ".." +
                          std::to_string(kMaxChunkKb) + "); a comma list runs pipelined once per size");
    parser.add_string("--in-flight", &o.in_flight,
                      "pipelined: MPI operations in flight, 1 = one blocking MPI_Allreduce per chunk, N = up to N "
                      "MPI_Iallreduce (1.." +
                          std::to_string(kMaxInFlight) + "); a comma list runs each");
    parser.add_switch("--no-reference", &o.no_reference, "skip the single-GPU reference run on rank 0");
    parser.add_double("--timeout", &o.timeout_s, 1.0, 86400.0,
                      "seconds a rank may wait on the others before the job gives up (exit 3)");
    parser.add_string("--json", &o.json, "also write the RESULT object(s) to this file (the last one)");
    parser.add_switch("--skip-without-gpus", &o.skip_without_gpus,
                      "exit 77 (a skipped test) instead of running when a node has more ranks than GPUs");
    parser.add_switch("--bench-allreduce", &o.bench, "time the combine alone over a sweep of sizes instead of FWI");
    parser.add_int("--min-bytes", &o.bench_settings.min_bytes, 4, 1 << 30, "bench: smallest size in bytes");
    parser.add_int("--max-bytes", &o.bench_settings.max_bytes, 4, 1 << 30, "bench: largest size in bytes");
    parser.add_double("--step-factor", &o.bench_settings.step_factor, 1.01, 1024.0,
                      "bench: each size is this factor times the last");
    parser.add_int("--warmup", &o.bench_settings.warmup, 0, 1000, "bench: untimed combines per size");
    parser.add_int("--repeats", &o.bench_settings.repeats, 1, 1000, "bench: timed combines per size (median)");
    if (!parser.parse(argc, argv)) return false;
    validate(problem);
    if (o.bench_settings.min_bytes > o.bench_settings.max_bytes)
        throw UsageError("--min-bytes (" + std::to_string(o.bench_settings.min_bytes) +
                         ") must not exceed --max-bytes (" + std::to_string(o.bench_settings.max_bytes) + ")");
    return true;
}

bool asks_for_help(int argc, char** argv) {
    for (int i = 1; i < argc; ++i)
        if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) return true;
    return false;
}

// A variant named in --combine that cannot run here is an error; "all" skips it with a line.
void require_named_variants_available(const Options& o, const std::vector<VariantSpec>& specs) {
    if (o.combine == "all") return;
    for (const VariantSpec& spec : specs)
        if (spec.name == "cuda_aware" && !cuda_aware_unavailable_reason().empty())
            throw EnvironmentError("--combine cuda_aware: skipped: " + cuda_aware_unavailable_reason() +
                                   ". Use --combine pinned or pipelined (or all, which skips cuda_aware)");
}

// True on every rank when some node has more ranks than visible GPUs.
bool too_few_gpus_anywhere(double timeout_s) {
    WaitTimeout guard("the other ranks' GPU count", timeout_s);
    const double short_here = visible_gpu_count() < node_local_rank(MPI_COMM_WORLD).size ? 1.0 : 0.0;
    return reduce_over_ranks(short_here, MPI_MAX, "the GPU count of the other nodes", timeout_s) > 0.0;
}

// Prints (rank 0) where every rank runs, and returns the number of distinct GPUs the ranks use.
int report_placement(int device, const std::string& shots_text, double timeout_s) {
    struct Placement {
        char line[384];
        char gpu[160];  // host and PCI bus id: the same GPU seen by two ranks
    } mine{}, none{};
    char bus_id[32] = {}, host[MPI_MAX_PROCESSOR_NAME] = {};
    int host_length = 0;
    CUDA_CHECK(cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, device));
    MPI_CHECK(MPI_Get_processor_name(host, &host_length));
    std::snprintf(mine.line, sizeof mine.line, "rank %d: host %s, GPU %d %s [%s]%s", world_rank(), host, device,
                  describe_device(device).c_str(), bus_id, shots_text.c_str());
    std::snprintf(mine.gpu, sizeof mine.gpu, "%s/%s", host, bus_id);
    std::vector<Placement> all(world_rank() == 0 ? world_size() : 0, none);
    {
        WaitTimeout guard("the placement report", timeout_s);
        MPI_CHECK(MPI_Gather(&mine, sizeof mine, MPI_BYTE, all.data(), sizeof mine, MPI_BYTE, 0, MPI_COMM_WORLD));
    }
    std::set<std::string> gpus;
    for (const Placement& p : all) {
        std::printf("  %s\n", p.line);
        gpus.insert(p.gpu);
    }
    return int(reduce_over_ranks(double(gpus.size()), MPI_MAX, "the GPU count", timeout_s));
}

// ---- the single-GPU reference (rank 0) -------------------------------------------------------------

struct Reference {
    double time_per_gradient = 0.0;  // median
    std::vector<float> first_gradient;
    std::vector<double> misfits;
    std::vector<float> final_model;
};

// 01's loop on this rank's GPU over all shots, timed the same way: host time of the gradient, median
// over the iterations after one untimed warm-up.
Reference run_reference(const Problem& p, GpuPropagator& gpu, int iterations) {
    NvtxRange range("single-GPU reference");
    const std::vector<int> shots = all_shots(p.nshots);
    std::vector<float> velocity = initial_model(p);
    gpu.set_velocity(velocity);
    gpu.gradient(shots);  // warm-up: builds the CUDA graphs
    Reference ref;
    std::vector<double> seconds;
    for (int it = 0; it < iterations; ++it) {
        HostTimer timer;
        GradientResult g = gpu.gradient(shots);
        seconds.push_back(timer.seconds());
        update_model(p, g.gradient, velocity);
        gpu.set_velocity(velocity);
        ref.misfits.push_back(g.misfit);
        if (it == 0) ref.first_gradient = std::move(g.gradient);
    }
    ref.time_per_gradient = median(seconds);
    ref.final_model = velocity;
    std::printf("reference: 1 GPU, all %d shots: %.4f s per gradient (median of %d)\n", p.nshots, ref.time_per_gradient,
                iterations);
    return ref;
}

// ---- one variant's FWI run ---------------------------------------------------------------------------

struct Context {
    const Problem& p;
    const Options& o;
    int ranks, gpus;
    std::vector<int> my_shots;
    GpuPropagator& gpu;
    DeviceBuffer<float>& device_gradient;
    const Reference* reference;  // rank 0 with the reference run, else null
};

struct IterationTimes {
    double compute = 0.0;   // local gradient on this rank's GPU
    CombineTimes combine;   // the gradient (and misfit) summed over the ranks
    double gradient = 0.0;  // compute + combine: the combined gradient is on every GPU
    double update = 0.0;    // combined gradient to the host, update_model, new model to the GPU
    double total = 0.0;
};

// The local gradient, left in device memory where the combine starts. GpuPropagator::gradient returns it
// in host memory, so it is uploaded again (0.8 MB for the default problem: tens of microseconds, counted in
// compute); a propagator that handed out its device gradient would save that copy.
double local_gradient(Context& c, IterationTimes& t) {
    NvtxRange range("local gradient");
    HostTimer timer;
    const GradientResult g = c.gpu.gradient(c.my_shots);
    c.device_gradient.upload(g.gradient);
    CUDA_CHECK(cudaStreamSynchronize(nullptr));
    t.compute = timer.seconds();
    return g.misfit;
}

// Sums the gradient (in device memory) and the misfit over the ranks; returns the total misfit.
double combine_step(Context& c, DeviceCombine& combine, const VariantSpec& spec, double misfit, IterationTimes& t) {
    NvtxRange range("combine");
    WaitTimeout guard("the gradient combine (" + spec.label() + ")", c.o.timeout_s);
    t.combine = combine.combine(c.p.model_cells());
    HostTimer timer;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &misfit, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    t.combine.mpi += timer.seconds();
    t.combine.wall += timer.seconds();
    return misfit;
}

struct VariantRun {
    VariantSpec spec;
    std::string skipped_because;
    std::vector<IterationTimes> iterations;
    std::vector<double> misfits;
    std::vector<float> first_gradient;  // rank 0: the combined gradient of the first iteration
    std::vector<float> final_model;
    double slowest_compute = 0.0;  // the slowest rank's median compute time
};

void print_iteration(int it, int iterations, double misfit, const IterationTimes& t) {
    std::printf(
        "  it %2d/%d  misfit %.6e  compute %7.2f  to-host %6.2f  MPI %6.2f  to-device %6.2f  combine %6.2f  "
        "update %6.2f  total %7.2f ms\n",
        it + 1, iterations, misfit, 1e3 * t.compute, 1e3 * t.combine.to_host, 1e3 * t.combine.mpi,
        1e3 * t.combine.to_device, 1e3 * t.combine.wall, 1e3 * t.update, 1e3 * t.total);
}

VariantRun run_variant(Context& c, const VariantSpec& spec) {
    const bool root = world_rank() == 0;
    VariantRun run{spec, "", {}, {}, {}, {}, 0.0};
    DeviceCombine combine(spec, c.device_gradient.data(), c.p.model_cells(), MPI_COMM_WORLD);
    run.skipped_because = combine.unavailable_reason();
    if (!run.skipped_because.empty()) {
        if (root) std::printf("\n%s: skipped: %s\n", spec.label().c_str(), run.skipped_because.c_str());
        return run;
    }
    if (root)
        std::printf("\n== %s: %s%s\n", spec.label().c_str(), spec.description().c_str(),
                    spec.name == "pipelined" ? "\n   (to-host, MPI and to-device overlap: each is its busy time; "
                                               "combine is the wall time)"
                                             : "");
    std::vector<float> velocity = initial_model(c.p);
    c.gpu.set_velocity(velocity);
    {  // warm-up, not timed: CUDA graphs for this rank's batch, MPI connections, the staging buffers
        IterationTimes warm_up;
        combine_step(c, combine, spec, local_gradient(c, warm_up), warm_up);
    }
    for (int it = 0; it < c.o.iterations; ++it) {
        // All ranks start together, so rank 0's clock covers the slowest rank's compute.
        barrier_with_timeout(MPI_COMM_WORLD, "the start of an iteration", c.o.timeout_s);
        IterationTimes t;
        HostTimer total;
        const double misfit = combine_step(c, combine, spec, local_gradient(c, t), t);
        t.gradient = total.seconds();
        std::vector<float> combined;
        {
            NvtxRange range("update");
            HostTimer timer;
            combined = c.device_gradient.download(c.p.model_cells());
            update_model(c.p, combined, velocity);
            c.gpu.set_velocity(velocity);
            t.update = timer.seconds();
        }
        t.total = total.seconds();
        run.iterations.push_back(t);
        run.misfits.push_back(misfit);
        if (root) {
            if (it == 0) run.first_gradient = std::move(combined);
            print_iteration(it, c.o.iterations, misfit, t);
        }
    }
    run.final_model = velocity;
    std::vector<double> compute;
    for (const IterationTimes& t : run.iterations) compute.push_back(t.compute);
    run.slowest_compute = reduce_over_ranks(median(compute), MPI_MAX, "the compute times", c.o.timeout_s);
    return run;
}

// ---- verification and report -------------------------------------------------------------------------

struct Verdict {
    bool models_identical = false;
    double grad_rel_diff = 0.0, model_rel_diff = 0.0, misfit_rel_diff = 0.0;
    bool verified = false;
};

// Collective: every rank's final model against rank 0's, bit for bit.
bool models_identical_across_ranks(const std::vector<float>& model, double timeout_s) {
    std::vector<float> rank0 = model;
    int identical = 0;
    {
        WaitTimeout guard("rank 0's final model", timeout_s);
        MPI_CHECK(MPI_Bcast(rank0.data(), int(rank0.size()), MPI_FLOAT, 0, MPI_COMM_WORLD));
        int mine = std::memcmp(rank0.data(), model.data(), model.size() * sizeof(float)) == 0;
        MPI_CHECK(MPI_Allreduce(&mine, &identical, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    }
    return identical == 1;
}

Verdict verify(const Context& c, const VariantRun& run) {
    Verdict v;
    v.models_identical = models_identical_across_ranks(run.final_model, c.o.timeout_s);
    v.verified = v.models_identical;
    if (!c.reference) return v;
    // The first gradient is where the combine is checked: later ones start from models that already differ
    // by the rounding of the earlier iterations (the final model is checked for that).
    v.grad_rel_diff = compare(run.first_gradient, c.reference->first_gradient).relative_l2;
    v.misfit_rel_diff = std::abs(run.misfits.front() - c.reference->misfits.front()) /
                        std::max(c.reference->misfits.front(), 1e-30);
    v.model_rel_diff = compare(run.final_model, c.reference->final_model).relative_l2;
    v.verified = v.verified && v.grad_rel_diff <= kTolerance && v.model_rel_diff <= kTolerance &&
                 v.misfit_rel_diff <= kTolerance;
    return v;
}

template <typename Field>
double median_of(const VariantRun& run, Field field) {
    std::vector<double> values;
    for (const IterationTimes& t : run.iterations) values.push_back(field(t));
    return median(values);
}

struct Summary {
    double per_gradient, per_iteration, compute, combine, to_host, mpi, to_device, update;
};

Summary summarize(const VariantRun& run) {
    return {median_of(run, [](const IterationTimes& t) { return t.gradient; }),
            median_of(run, [](const IterationTimes& t) { return t.total; }),
            median_of(run, [](const IterationTimes& t) { return t.compute; }),
            median_of(run, [](const IterationTimes& t) { return t.combine.wall; }),
            median_of(run, [](const IterationTimes& t) { return t.combine.to_host; }),
            median_of(run, [](const IterationTimes& t) { return t.combine.mpi; }),
            median_of(run, [](const IterationTimes& t) { return t.combine.to_device; }),
            median_of(run, [](const IterationTimes& t) { return t.update; })};
}

// Rank 0: the speedup line, the result line; returns the RESULT object.
JsonObject report_variant(const Context& c, const VariantRun& run, const Verdict& v) {
    const Summary s = summarize(run);
    const std::string gpus_text = std::to_string(c.gpus) + (c.gpus > 1 ? " GPUs" : " GPU") +
                                  (c.ranks != c.gpus ? " (" + std::to_string(c.ranks) + " ranks)" : "");
    std::printf(
        "  medians: compute %.2f ms (slowest rank %.2f), combine %.3f ms = %.1f%% of the iteration "
        "(to-host %.3f, MPI %.3f, to-device %.3f), update %.2f ms\n",
        1e3 * s.compute, 1e3 * run.slowest_compute, 1e3 * s.combine, 100.0 * s.combine / s.per_iteration,
        1e3 * s.to_host, 1e3 * s.mpi, 1e3 * s.to_device, 1e3 * s.update);
    JsonObject result;
    result.add("pattern", "03_host_staged_mpi")
        .add("variant", run.spec.name)
        .add("gpus", c.gpus)
        .add("ranks", c.ranks)
        .add("problem", c.p.name)
        .add("grid", std::to_string(c.p.nz) + "x" + std::to_string(c.p.nx))
        .add("shots", c.p.nshots)
        .add("nt", c.p.nt)
        .add("iterations", c.o.iterations)
        .add("time_per_gradient_s", s.per_gradient)
        .add("time_per_iteration_s", s.per_iteration);
    if (c.reference) {
        const double speedup = c.reference->time_per_gradient / s.per_gradient;
        std::printf("%s: %s: 1 GPU: %.4f s, %s: %.4f s, speedup: %.2f, efficiency: %.0f%%, grad rel diff: %.1e\n",
                    run.spec.label().c_str(), c.p.summary().c_str(), c.reference->time_per_gradient, gpus_text.c_str(),
                    s.per_gradient, speedup, 100.0 * speedup / c.gpus, v.grad_rel_diff);
        result.add("reference_time_per_gradient_s", c.reference->time_per_gradient)
            .add("speedup", speedup)
            .add("efficiency", speedup / c.gpus)
            .add("grad_rel_diff", v.grad_rel_diff)
            .add("model_rel_diff", v.model_rel_diff)
            .add("misfit_rel_diff", v.misfit_rel_diff);
    } else {
        std::printf("%s: %s: %s: %.4f s per gradient (no reference run)\n", run.spec.label().c_str(),
                    c.p.summary().c_str(), gpus_text.c_str(), s.per_gradient);
    }
    result.add("combine_s", s.combine)
        .add("combine_share", s.combine / s.per_iteration)
        .add("compute_s", s.compute)
        .add("slowest_rank_compute_s", run.slowest_compute)
        .add("to_host_s", s.to_host)
        .add("mpi_s", s.mpi)
        .add("to_device_s", s.to_device)
        .add("update_s", s.update)
        .add("misfit_first", run.misfits.front())
        .add("misfit_final", run.misfits.back())
        .add("models_identical_across_ranks", v.models_identical)
        .add("tolerance", kTolerance)
        .add("verified", v.verified);
    if (run.spec.name == "pipelined")
        result.add("chunk_kb", run.spec.chunk_kb).add("in_flight", run.spec.pipeline.in_flight);
    std::printf("  verification: %s: final models %s across ranks", v.verified ? "PASSED" : "FAILED",
                v.models_identical ? "bit-identical" : "DIFFER");
    if (c.reference)
        std::printf("; gradient, misfit and final model vs the 1-GPU reference: rel %.1e, %.1e, %.1e (tolerance %.0e)",
                    v.grad_rel_diff, v.misfit_rel_diff, v.model_rel_diff, kTolerance);
    std::printf("\n");
    return result;
}

void print_comparison(const std::vector<VariantRun>& runs, const std::vector<Verdict>& verdicts, const Context& c) {
    std::printf("\n# combine variants, %zu B gradient, %d ranks: medians over %d iterations (ms)\n",
                c.p.model_cells() * sizeof(float), c.ranks, c.o.iterations);
    std::printf("# %-22s %12s %9s %7s %8s %8s %9s %8s\n", "variant", "per gradient", "combine", "share", "to-host",
                "MPI", "to-device", "verified");
    for (size_t k = 0; k < runs.size(); ++k) {
        if (!runs[k].skipped_because.empty()) {
            std::printf("  %-22s skipped\n", runs[k].spec.label().c_str());
            continue;
        }
        const Summary s = summarize(runs[k]);
        std::printf("  %-22s %12.3f %9.3f %6.1f%% %8.3f %8.3f %9.3f %8s\n", runs[k].spec.label().c_str(),
                    1e3 * s.per_gradient, 1e3 * s.combine, 100.0 * s.combine / s.per_iteration, 1e3 * s.to_host,
                    1e3 * s.mpi, 1e3 * s.to_device, verdicts[k].verified ? "yes" : "NO");
    }
}

int run_fwi(const Problem& p, const Options& o, const std::vector<VariantSpec>& specs, int gpus) {
    const bool root = world_rank() == 0;
    const std::vector<int> my_shots = split_shots(p.nshots, world_size(), world_rank()).shots();
    GpuPropagator gpu(p, true_model(p));
    gpu.require_gradient_fits();  // refuse now, not after modelling the observed data
    if (root) std::printf("memory (rank 0): %s\n", gpu.memory_report().c_str());

    // Rank 0 also needs every shot's observed traces for the reference.
    const bool with_reference = root && !o.no_reference;
    gpu.set_observed(gpu.observed_traces_of(with_reference ? all_shots(p.nshots) : my_shots));
    Reference reference;
    if (with_reference) reference = run_reference(p, gpu, o.iterations);
    barrier_with_timeout(MPI_COMM_WORLD, "rank 0's single-GPU reference run", o.timeout_s);

    DeviceBuffer<float> device_gradient(p.model_cells());
    Context c{p, o, world_size(), gpus, my_shots, gpu, device_gradient, with_reference ? &reference : nullptr};
    std::vector<VariantRun> runs;
    std::vector<Verdict> verdicts;
    std::string failed;
    for (const VariantSpec& spec : specs) {
        runs.push_back(run_variant(c, spec));
        verdicts.push_back({});
        if (!runs.back().skipped_because.empty()) continue;
        verdicts.back() = verify(c, runs.back());
        if (root) emit_result(report_variant(c, runs.back(), verdicts.back()), o.json);
        if (!verdicts.back().verified) failed += (failed.empty() ? "" : ", ") + spec.label();
    }
    if (root && runs.size() > 1) print_comparison(runs, verdicts, c);

    // Rank 0 knows the comparison with the reference; every rank learns the verdict, so all end alike.
    int any_failed = failed.empty() ? 0 : 1;
    {
        WaitTimeout guard("the verdict of rank 0", o.timeout_s);
        MPI_CHECK(MPI_Bcast(&any_failed, 1, MPI_INT, 0, MPI_COMM_WORLD));
    }
    if (any_failed)
        throw VerificationError(root ? "variant(s) " + failed +
                                           " differ from the 1-GPU reference beyond the tolerance, or their final "
                                           "models differ across ranks (see the verification lines)"
                                     : std::string("see rank 0"));
    return kExitOk;
}

int run(int argc, char** argv) {
    const int rank = world_rank(), ranks = world_size();
    if (rank != 0 && asks_for_help(argc, argv)) return kExitOk;  // rank 0 prints it
    Problem problem = preset_from_args(argc, argv);
    Options o;
    if (!parse_options(argc, argv, problem, o)) return kExitOk;
    const std::vector<VariantSpec> specs = variant_specs(o.combine, o.chunk_kb, o.in_flight);
    require_named_variants_available(o, specs);
    const ShotRange mine =
        o.bench ? ShotRange{} : split_shots(problem.nshots, ranks, rank);  // more ranks than shots: exit 2

    if (o.skip_without_gpus && too_few_gpus_anywhere(o.timeout_s)) {
        if (rank == 0) std::printf("skipped: a node has more ranks than visible GPUs (--skip-without-gpus)\n");
        return 77;
    }
    const int device = [&] {
        WaitTimeout guard("the other ranks' GPU selection", o.timeout_s);
        return select_gpu_for_rank(MPI_COMM_WORLD, GpuSharing::warn);
    }();
    if (rank == 0)
        std::printf("03_host_staged_mpi: %d rank(s), %s\n", ranks,
                    o.bench ? "--bench-allreduce" : problem.summary().c_str());
    const std::string shots_text =
        o.bench ? "" : ", shots " + std::to_string(mine.first) + ".." + std::to_string(mine.first + mine.count - 1);
    const int gpus = report_placement(device, shots_text, o.timeout_s);
    if (o.bench) return run_bench_allreduce(specs, o.bench_settings, gpus, o.timeout_s, o.json);
    return run_fwi(problem, o, specs, gpus);
}

}  // namespace

int main(int argc, char** argv) {
    return run_mpi_program("03_host_staged_mpi", argc, argv, [&] { return run(argc, argv); });
}
