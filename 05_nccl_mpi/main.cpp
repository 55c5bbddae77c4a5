// 05_nccl_mpi: one process per GPU; NCCL bootstrapped over MPI.
//
// Purpose: the shot-parallel FWI of 04 with one MPI rank per GPU instead of one thread per GPU: the
// layout that also spans nodes. MPI starts the processes, tells each its node-local rank (so it can pick
// its GPU) and carries NCCL's 128-byte unique id once; every gradient then travels through NCCL.
// What you learn: the bootstrap (rank 0 ncclGetUniqueId, MPI_Bcast, MPI_Barrier, ncclCommInitRankConfig
// on every rank, then ncclCommSplit into a blocking communicator where NCCL is 2.18 or newer), one GPU per
// rank from MPI_Comm_split_type and the GPUs' PCI bus ids, and how a job ends when a rank dies: every
// wait on another rank has a timeout, after which the communicator (if there is one yet) is aborted.
// How it works: default mode: every rank runs the loop of common/shot_parallel.hpp: computes the
// gradient of its shots, ncclAllReduce sums them in device memory, every rank applies the same update on
// its GPU; --iterations times. Then the ranks' models are compared, and rank 0 runs the single-GPU
// reference and checks against it.
// --bench-allreduce: ncclAllReduce over a sweep of sizes, in 02's table (allreduce_bench.cu).
// --transport network: NCCL's network transport even between the GPUs of one host (what crossing nodes
// costs), in both modes.
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
#include "host_memory.hpp"
#include "mpi_env.hpp"
#include "mpi_team.hpp"
#include "nccl_combine.hpp"
#include "nccl_comm.hpp"
#include "nccl_mpi.hpp"
#include "output.hpp"
#include "problem.hpp"
#include "shot_parallel.hpp"
#include "test_fault.hpp"
#include "timing.hpp"

using namespace fwi;

namespace {

struct Options : ShotParallelOptions {
    bool verbose = false;
    bool bench_allreduce = false;
    std::string transport = "auto";
    std::string transport_line;  // what apply_nccl_transport did, for the start-up lines
    AllreduceSweepOptions sweep;
};

// ---- the combine -----------------------------------------------------------------------------------

// The combine is nccl_sum (common/nccl_combine.hpp): this rank's gradient and misfit summed in place over
// all ranks, in device memory, as one NCCL group of two allreduces, waited for with --timeout.

// ---- set-up and report ------------------------------------------------------------------------------

// `what`: the problem's summary, or "--bench-allreduce".
void print_header(const char* what, const Options& o, int ranks) {
    std::printf("05_nccl_mpi: %s, %s (one GPU each), %s\n", what, count_of(ranks, "rank").c_str(),
                nccl_version_string().c_str());
    std::printf("  %s\n", o.transport_line.c_str());
    if (o.verbose) std::printf("  %s\n", nccl_transport_hint().c_str());
}

// ---- the run -----------------------------------------------------------------------------------------

int run_fwi(const Problem& p, const Options& o, const TestFault& fault) {
    // 1. One GPU per rank, from the node-local rank; more ranks than shots is a usage error, found
    //    before any GPU is touched. Where every rank sees all of the node's GPUs, select_gpu_for_rank
    //    comes down to:
    //        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    //        MPI_Comm_rank(node, &node_rank);
    //        cudaSetDevice(node_rank);
    //    The real one (common/mpi_gpu.cu) compares the GPUs' PCI bus ids across the node's ranks, so that
    //    it also works where each rank sees only its own GPU (a per-rank CUDA_VISIBLE_DEVICES), and two
    //    ranks never share one GPU.
    const int rank = world_rank(), ranks = world_size();
    const ShotRange mine = split_shots(p.nshots, ranks, rank);
    if (rank == 0) check_writable(o.json, "--json");  // written at the end: refused now, not after the run
    const int device = select_gpu_for_rank(MPI_COMM_WORLD, GpuSharing::refuse, o.timeout_s);
    if (rank == 0) print_header(p.summary().c_str(), o, ranks);
    print_rank_placement(device, ", shots " + mine.text(), o.timeout_s);

    // 2. This rank's share of the shots (rank 0's also holds every shot's data, for the reference).
    const bool with_reference = rank == 0 && !o.no_reference;
    MpiTeam team(MPI_COMM_WORLD, o.timeout_s);
    const HostTimer setup_timer;
    GpuShare share(p, mine, initial_model(p), with_reference ? Observed::all_shots : Observed::own_shots);
    team.wait_for_member0_setup(rank, setup_timer.seconds());

    // 3. NCCL bootstrapped over MPI: rank 0's unique id reaches every rank through MPI_Bcast. Without its
    //    time limits and checks (common/nccl_mpi.cpp, common/nccl_comm.cpp), nccl_bootstrap_over_mpi is:
    //        ncclUniqueId id;
    //        if (rank == 0) ncclGetUniqueId(&id);
    //        MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    //        MPI_Barrier(MPI_COMM_WORLD);        // the init's time limit starts with every rank there
    //        ncclCommInitRank(&comm, ranks, id, rank);
    //    The real init is non-blocking (ncclCommInitRankConfig, polled against --timeout); with NCCL 2.18
    //    or newer it is then split (ncclCommSplit) into a blocking communicator for the allreduces, which
    //    makes each combine faster (04's README says why).
    trigger_test_fault(fault, FaultPoint::bootstrap, rank, o.timeout_s);  // a test hook, as below
    const ncclComm_t comm = nccl_bootstrap_over_mpi(MPI_COMM_WORLD, o.timeout_s, o.timeout_s);

    // 4. The FWI loop, the combine being nccl_sum: the gradient's and the misfit's allreduces in one group.
    const CombineStep combine = [&](GpuShare& gpu_share, int iteration) {
        // A test hook, not part of the pattern: with --test-fault one rank fails before its first timed combine.
        if (iteration == kFirstIteration) trigger_test_fault(fault, FaultPoint::allreduce, rank, o.timeout_s);
        nccl_sum(gpu_share, comm, o.timeout_s);
    };
    const HostTimer run_timer;
    const MemberRecord record = run_iterations(team, rank, share, combine, kFirstIteration, o.iterations);
    // The ranks' times gathered and their models compared, over MPI; then the communicator's finalize.
    const RunSummary run = summarize(team, rank, record, "05_nccl_mpi", "", kFirstIteration);
    nccl_destroy_all({comm}, o.timeout_s);
    const double run_seconds = run_timer.seconds();

    // 5. Rank 0 runs the single-GPU reference on its share, checks against it and reports; the others wait.
    if (rank == 0) {
        const ReferenceRun reference =
            with_reference ? run_reference(share, initial_model(p), o.iterations) : ReferenceRun{};
        report(p, run, with_reference ? &reference : nullptr, o.json);
    }
    wait_for_rank0_to_finish(run_seconds, o.timeout_s);
    return kExitOk;
}

int run_bench(const Options& o, const TestFault& fault) {
    const int rank = world_rank(), ranks = world_size();
    if (rank == 0) check_writable(o.json, "--json");  // written at the end: refused now, not after the run
    const int device = select_gpu_for_rank(MPI_COMM_WORLD, GpuSharing::refuse, o.timeout_s);
    require_sweep_fits(allreduce_sweep_sizes(o.sweep).back(), 2, device_memory_bytes(device),
                       "a send and a receive buffer on every GPU", "GPU " + std::to_string(device) + "'s");
    if (rank == 0) print_header("--bench-allreduce", o, ranks);
    print_rank_placement(device, "", o.timeout_s);
    trigger_test_fault(fault, FaultPoint::bootstrap, rank, o.timeout_s);  // a test hook, as in run_fwi
    const ncclComm_t comm = nccl_bootstrap_over_mpi(MPI_COMM_WORLD, o.timeout_s, o.timeout_s);
    const long long wrong = run_bench_allreduce(comm, rank, ranks, o.sweep, o.timeout_s, o.json, fault);
    nccl_destroy_all({comm}, o.timeout_s);
    if (rank == 0 && wrong != 0)
        throw VerificationError(std::to_string(wrong) + " wrong elements in the allreduce results (see #wrong)");
    return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
    return run_mpi_program("05_nccl_mpi", argc, argv, [&]() -> int {
        Problem problem = preset_from_args(argc, argv);
        Options options;
        ArgParser parser("05_nccl_mpi",
                         "Shot-parallel FWI with one MPI rank per GPU; NCCL communicators bootstrapped over MPI, "
                         "gradients combined with ncclAllReduce. Start with mpirun -np N.");
        const std::vector<std::string> problem_flags = add_problem_flags(parser, problem);
        add_shot_parallel_flags(parser, options);
        parser.add_switch("--verbose", &options.verbose, "print how to see which transport NCCL uses");
        parser.add_switch("--bench-allreduce", &options.bench_allreduce,
                          "instead of FWI: ncclAllReduce over a sweep of sizes (02's table)");
        add_nccl_transport_flag(parser, options.transport);
        add_allreduce_sweep_flags(parser, options.sweep, &options.bench_allreduce);
        refuse_fwi_flags_with_bench(parser, problem_flags, &options.bench_allreduce);
        std::string fault_spec;
        parser.add_string(kFaultFlag, &fault_spec, "testing: make a rank fail on purpose (test_fault.hpp)");
        parser.hide_from_help(kFaultFlag);
        if (!parser.parse(argc, argv)) return kExitOk;
        validate(problem, parser);
        require_host_memory(problem, ranks_on_this_node(options.timeout_s));
        validate_allreduce_sweep_options(options.sweep);
        const TestFault fault = parse_test_fault(fault_spec);  // after parse: --help wins over a bad spec
        if (fault.rank >= world_size())
            throw UsageError("--test-fault: rank " + std::to_string(fault.rank) + " does not exist; allowed 0.." +
                             std::to_string(world_size() - 1));
        options.transport_line = apply_nccl_transport(options.transport);  // every rank, before NCCL starts
        return options.bench_allreduce ? run_bench(options, fault) : run_fwi(problem, options, fault);
    });
}
