// 05_nccl_mpi: one process per GPU; NCCL bootstrapped over MPI.
//
// Purpose: the shot-parallel FWI of 04 with one MPI rank per GPU instead of one thread per GPU: the
// layout that also spans nodes. MPI starts the processes, tells each its node-local rank (so it can pick
// its GPU) and carries NCCL's 128-byte unique id once; every gradient then travels through NCCL.
// What you learn: the bootstrap (rank 0 ncclGetUniqueId, MPI_Bcast, MPI_Barrier, ncclCommInitRankConfig
// on every rank), one GPU per rank from MPI_Comm_split_type, and how a job ends when a rank dies: every
// wait after the bootstrap has a timeout, after which the communicator is aborted.
// How it works: default mode: rank 0 runs the single-GPU reference; every rank computes the gradient of
// its shots, ncclAllReduce sums them, every rank applies the same update; --iterations times. Then the
// ranks' models are compared (NCCL max and min of the model) and rank 0 checks against its reference.
// --bench-allreduce: ncclAllReduce over a sweep of sizes, in 02's table (allreduce_bench.cu).
// What you should see: the ranks and their GPUs, the misfit falling, the speedup over the single-GPU
// reference and "verified"; or the bandwidth table with 0 in #wrong.
#include <mpi.h>
#include <nccl.h>

#include <cstdio>
#include <string>
#include <vector>

#include "allreduce_bench.hpp"
#include "device.hpp"
#include "errors.hpp"
#include "mpi_check.hpp"
#include "mpi_env.hpp"
#include "nccl_check.hpp"
#include "nccl_comm.hpp"
#include "nccl_mpi.hpp"
#include "problem.hpp"
#include "shot_parallel.hpp"
#include "test_fault.hpp"
#include "timing.hpp"

using namespace fwi;

namespace {

struct Options : ShotParallelOptions {
    bool bench_allreduce = false;
    BenchOptions bench;
};

// The combine: this rank's gradient and misfit summed in place over all ranks (a sum, so the result is
// the gradient over all shots). One GPU per process, so nothing needs grouping across GPUs; the group
// only bundles the two calls into one launch.
void combine(const GpuShare& share, ncclComm_t comm, double timeout_s) {
    NCCL_CHECK(ncclGroupStart());
    NCCL_CHECK(ncclAllReduce(share.gradient(), share.gradient(), share.gradient_count(), ncclFloat, ncclSum, comm,
                             share.stream()));
    NCCL_CHECK(ncclAllReduce(share.misfit(), share.misfit(), 1, ncclDouble, ncclSum, comm, share.stream()));
    NCCL_CHECK(ncclGroupEnd());
    wait_for_nccl({comm}, {share.stream()}, "ncclAllReduce of the gradient and misfit", timeout_s);
}

template <typename T>
ncclDataType_t nccl_type();
template <>
ncclDataType_t nccl_type<float>() { return ncclFloat; }
template <>
ncclDataType_t nccl_type<double>() { return ncclDouble; }

// Host values reduced element-wise over the ranks (NCCL reduces device memory: up, reduce, down). After
// the bootstrap every exchange goes through NCCL and its timed wait, never through a blocking MPI call
// that a dead rank would leave waiting forever.
template <typename T>
std::vector<T> allreduce_values(const std::vector<T>& values, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream,
                                const std::string& what, double timeout_s) {
    DeviceBuffer<T> buffer(values.size());
    buffer.upload(values, stream);
    NCCL_CHECK(ncclAllReduce(buffer.data(), buffer.data(), values.size(), nccl_type<T>(), op, comm, stream));
    wait_for_nccl({comm}, {stream}, what, timeout_s);
    return buffer.download(values.size(), stream);
}

std::string host_name() {
    char name[MPI_MAX_PROCESSOR_NAME] = {};
    int length = 0;
    MPI_CHECK(MPI_Get_processor_name(name, &length));
    return std::string(name, length);
}

// Rank 0 prints where every rank runs (gathered over MPI: this is still before the bootstrap).
void print_layout(int rank, int ranks, int device, const std::string& shots) {
    constexpr int kLine = 256;
    char line[kLine] = {};
    std::snprintf(line, kLine, "  rank %d on %s: GPU %d, %s%s", rank, host_name().c_str(), device,
                  describe_device(device).c_str(), shots.c_str());
    std::vector<char> lines(rank == 0 ? size_t(ranks) * kLine : 0);
    MPI_CHECK(MPI_Gather(line, kLine, MPI_CHAR, lines.data(), kLine, MPI_CHAR, 0, MPI_COMM_WORLD));
    for (int r = 0; rank == 0 && r < ranks; ++r) std::printf("%s\n", &lines[size_t(r) * kLine]);
    std::fflush(stdout);
}

void print_header(const char* mode, const Options& o, int ranks) {
    std::printf("05_nccl_mpi: %s, %d rank%s (one GPU each), %s\n", mode, ranks, ranks > 1 ? "s" : "",
                nccl_version_string().c_str());
    if (o.verbose) std::printf("  %s\n", nccl_transport_hint().c_str());
}

int run_fwi(const Problem& p, const Options& o, const TestFault& fault) {
    const int rank = world_rank(), ranks = world_size();
    // More ranks than shots is a usage error, found before any GPU is touched.
    const ShotRange mine = split_shots(p.nshots, ranks, rank);
    const int device = select_gpu_for_rank(MPI_COMM_WORLD, GpuSharing::refuse);
    if (rank == 0) print_header(p.summary().c_str(), o, ranks);
    print_layout(rank, ranks, device,
                 ", shots " + std::to_string(mine.first) + ".." + std::to_string(mine.first + mine.count - 1));

    // Rank 0's reference runs before its share of the work exists (so the two never hold GPU memory at
    // the same time); the other ranks build theirs and then wait in the bootstrap's MPI calls.
    const bool with_reference = rank == 0 && !o.no_reference;
    ReferenceRun reference;
    if (with_reference) reference = run_reference(p, o.iterations);
    GpuShare share(p, mine);
    const ncclComm_t comm = nccl_bootstrap_over_mpi(MPI_COMM_WORLD, o.timeout_s);
    combine(share, comm, o.timeout_s);  // warm-up: the first collective also sets up NCCL's connections

    ShotParallelRun result;
    result.pattern = "05_nccl_mpi";
    result.gpus = result.ranks = ranks;
    std::vector<double> gradient_seconds, combine_seconds, iteration_seconds;  // this rank's
    std::vector<float> gradient;
    double misfit = 0.0;
    for (int it = 0; it < o.iterations; ++it) {
        HostTimer timer;
        share.compute_and_stage();
        const double local_seconds = timer.seconds();
        if (it == 0) trigger_test_fault(fault, rank, o.timeout_s);
        combine(share, comm, o.timeout_s);
        share.download_combined(gradient, misfit);
        gradient_seconds.push_back(timer.seconds());
        combine_seconds.push_back(gradient_seconds.back() - local_seconds);
        share.update(gradient);
        iteration_seconds.push_back(timer.seconds());
        if (it == 0) {
            result.first_gradient = gradient;
            result.first_misfit = misfit;
        }
        if (rank == 0)
            print_iteration(it, o.iterations, misfit, gradient_seconds.back(), combine_seconds.back(),
                            iteration_seconds.back());
    }

    // Every rank's model is the same iff the element-wise maximum over the ranks equals the minimum.
    const cudaStream_t stream = share.stream();
    const std::vector<float>& model = share.velocity();
    result.models_identical = allreduce_values(model, ncclMax, comm, stream, "ncclAllReduce (max) of the models",
                                               o.timeout_s) ==
                              allreduce_values(model, ncclMin, comm, stream, "ncclAllReduce (min) of the models",
                                               o.timeout_s);
    result.final_model = model;
    // The slowest rank sets the time per gradient; the combine's own cost is what the last rank to finish
    // its shots waits, the least over the ranks (the others also wait for that rank).
    result.gradient_seconds = allreduce_values(gradient_seconds, ncclMax, comm, stream, "ncclAllReduce of the timings",
                                               o.timeout_s);
    result.iteration_seconds = allreduce_values(iteration_seconds, ncclMax, comm, stream,
                                                "ncclAllReduce of the timings", o.timeout_s);
    result.combine_seconds = allreduce_values(combine_seconds, ncclMin, comm, stream, "ncclAllReduce of the timings",
                                              o.timeout_s);
    nccl_destroy_all({comm}, o.timeout_s);
    if (rank == 0) verify_and_report(p, result, with_reference ? &reference : nullptr, o.json);
    return kExitOk;
}

int run_bench(const Options& o) {
    const int rank = world_rank(), ranks = world_size();
    const int device = select_gpu_for_rank(MPI_COMM_WORLD, GpuSharing::refuse);
    if (rank == 0) print_header("--bench-allreduce", o, ranks);
    print_layout(rank, ranks, device, "");
    const ncclComm_t comm = nccl_bootstrap_over_mpi(MPI_COMM_WORLD, o.timeout_s);
    const long long wrong = run_allreduce_bench(comm, rank, ranks, o.bench, o.timeout_s, o.json);
    nccl_destroy_all({comm}, o.timeout_s);
    if (rank == 0 && wrong != 0)
        throw VerificationError(std::to_string(wrong) + " wrong elements in the allreduce results (see #wrong)");
    return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
    return run_mpi_program("05_nccl_mpi", argc, argv, [&]() -> int {
        std::vector<std::string> args(argv, argv + argc);
        const TestFault fault = parse_test_fault(take_flag_value(args, "--test-fault"));
        std::vector<const char*> arg_pointers;
        for (const auto& arg : args) arg_pointers.push_back(arg.c_str());
        const int count = static_cast<int>(arg_pointers.size());

        Problem problem = preset_from_args(count, arg_pointers.data());
        Options options;
        ArgParser parser("05_nccl_mpi",
                         "Shot-parallel FWI with one MPI rank per GPU; NCCL communicators bootstrapped over MPI, "
                         "gradients combined with ncclAllReduce. Start with mpirun -np N.");
        add_problem_flags(parser, problem);
        add_shot_parallel_flags(parser, options);
        parser.add_switch("--bench-allreduce", &options.bench_allreduce,
                          "instead of FWI: ncclAllReduce over a sweep of sizes (02's table)");
        add_bench_flags(parser, options.bench);
        if (!parser.parse(count, arg_pointers.data())) return kExitOk;
        validate(problem);
        validate_bench_options(options.bench);
        if (fault.rank >= world_size())
            throw UsageError("--test-fault: rank " + std::to_string(fault.rank) + " does not exist; allowed 0.." +
                             std::to_string(world_size() - 1));
        return options.bench_allreduce ? run_bench(options) : run_fwi(problem, options, fault);
    });
}
