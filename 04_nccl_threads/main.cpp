// 04_nccl_threads: one process drives every GPU, and NCCL combines their gradients GPU to GPU.
//
// Purpose: the shot-parallel FWI step with the combine done by NCCL over NVLink or PCIe, in device
// memory: the gradient never leaves the GPUs. Each GPU computes the gradient of its shots; one
// ncclAllReduce (a sum) leaves the gradient over all shots on every GPU; every GPU applies the same
// update to its copy of the model.
// What you learn: one communicator per GPU in one process (what ncclCommInitAll does, here made with a
// time limit so that no wait can hang: common/nccl_comm.hpp), and the two ways to drive them:
//   --driver threads  each GPU's host thread issues its own GPU's ncclAllReduce
//   --driver group    GPU 0's thread issues every GPU's ncclAllReduce between ncclGroupStart and
//                     ncclGroupEnd; without the group, the first call could wait for the other GPUs'
//                     calls, which that same thread never gets to make: a deadlock
// How it works: one host thread per GPU runs the loop of common/shot_parallel.hpp (compute, wait,
// combine, update); the drivers differ only in who issues the NCCL calls.
// What you should see: the misfit falling, each iteration's phases, the speedup over the single-GPU
// reference this program runs afterwards on GPU 0, and "verified".
#include <nccl.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "device.hpp"
#include "errors.hpp"
#include "host_memory.hpp"
#include "launch_env.hpp"
#include "nccl_combine.hpp"
#include "nccl_comm.hpp"
#include "output.hpp"
#include "problem.hpp"
#include "shot_parallel.hpp"
#include "team.hpp"
#include "timing.hpp"

using namespace fwi;

namespace {

struct Options : ShotParallelOptions {
    bool verbose = false;
    int gpus = 0;
    std::string driver = "threads";
};

// ---- the combine -----------------------------------------------------------------------------------

// --driver threads: GPU g's own thread calls nccl_sum (common/nccl_combine.hpp) for its GPU: one group of
// its two allreduces, then the wait. The threads need no group between them, since each one's call may
// wait for the others' calls without keeping them from being made.

// --driver group: GPU 0's thread issues the allreduces of every GPU. Inside ncclGroupStart/ncclGroupEnd
// the calls only record the work; ncclGroupEnd launches them all together, so no call waits for a GPU
// whose call has not been made yet. nccl_group (common/nccl_comm.hpp) is that bracket: ncclGroupStart, the
// calls, ncclGroupEnd; where a call fails inside, it also closes the group and aborts the communicators.
// The other threads wait at the barrier until it is issued, then for their GPU: waiting before, on a stream
// still empty, would return at once, and update() would then be queued ahead of the allreduce and read the
// gradient before it is summed.
void combine_group_driver(const std::vector<std::optional<GpuShare>>& shares, const std::vector<ncclComm_t>& comms,
                          int g, ThreadTeam& team, double timeout_s) {
    if (g == 0) {
        nccl_group(comms, "the group of every GPU's allreduces (group driver)", [&] {
            for (size_t other = 0; other < shares.size(); ++other) enqueue_nccl_sum(*shares[other], comms[other]);
        });
    }
    team.barrier(g, "GPU 0's thread to issue the group of allreduces");
    wait_for_nccl({comms[g]}, {shares[g]->stream()}, "ncclAllReduce of the gradient and misfit (group driver)",
                  timeout_s);
}

// ---- set-up and report -------------------------------------------------------------------------------

void print_setup(const Problem& p, const Options& o, const std::vector<ShotRange>& split) {
    const int gpus = static_cast<int>(split.size());
    std::printf("04_nccl_threads: %s on %s, driver %s, %s\n", p.summary().c_str(), count_of(gpus, "GPU").c_str(),
                o.driver.c_str(), nccl_version_string().c_str());
    for (int g = 0; g < gpus; ++g)
        std::printf("  GPU %d: %s, shots %s\n", g, describe_device(g).c_str(), split[g].text().c_str());
    if (o.verbose) std::printf("  %s\n", nccl_transport_hint().c_str());
    std::fflush(stdout);
}

int run(const Problem& p, const Options& o) {
    // 1. Devices and shots: the split is checked before any GPU is touched (more GPUs than shots is a
    //    usage error).
    // --gpus 0: every visible GPU, but not more than there are shots (none visible: 1, which require_gpus
    // refuses).
    const int gpus = o.gpus > 0 ? o.gpus : std::clamp(visible_gpu_count(), 1, std::max(p.nshots, 1));
    const std::vector<ShotRange> split = split_all_shots(p.nshots, gpus);
    check_writable(o.json, "--json");  // written at the end: refused now, not after the run
    require_host_memory(p, gpus);
    require_gpus(gpus);
    warn_of_other_processes(0, gpus);
    print_setup(p, o, split);

    // 2. One communicator per GPU, all created by this process: without its time limit (common/nccl_comm.cpp),
    //    nccl_init_all is ncclCommInitAll(comms, gpus, devices).
    std::vector<int> devices;
    for (int g = 0; g < gpus; ++g) devices.push_back(g);
    const std::vector<ncclComm_t> comms = nccl_init_all(devices, o.timeout_s);

    // 3. One thread per GPU runs the FWI loop; the combine is the NCCL call of the chosen driver. GPU 0
    //    then runs the single-GPU reference on its own share.
    ThreadTeam team(gpus, o.timeout_s);
    // Every GPU's share. Each thread makes its own, before run_iterations' first barrier; they are owned
    // here, not by the threads, for the group driver: GPU 0's thread issues every GPU's allreduce, so a
    // share must outlive a thread that leaves early (a barrier that timed out) until every thread is done.
    std::vector<std::optional<GpuShare>> shares(gpus);
    const auto free_shares = [&] { team.run([&](int g) { shares[g].reset(); }); };  // each with its GPU current
    RunSummary run;
    ReferenceRun reference;
    try {
        team.run([&](int g) {
            const bool with_reference = g == 0 && !o.no_reference;
            const HostTimer setup_timer;
            GpuShare& share = shares[g].emplace(p, split[g], initial_model(p),
                                                with_reference ? Observed::all_shots : Observed::own_shots);
            team.wait_for_member0_setup(g, setup_timer.seconds());
            const CombineStep combine =
                o.driver == "threads"
                    ? CombineStep([&](GpuShare& gpu_share, int) { nccl_sum(gpu_share, comms[g], o.timeout_s); })
                    : CombineStep([&](GpuShare&, int) { combine_group_driver(shares, comms, g, team, o.timeout_s); });
            const MemberRecord record = run_iterations(team, g, share, combine, kFirstIteration, o.iterations);
            RunSummary summary = summarize(team, g, record, "04_nccl_threads", o.driver, kFirstIteration);
            if (g != 0) return;
            run = std::move(summary);
            if (with_reference) reference = run_reference(share, initial_model(p), o.iterations);
        });
    } catch (...) {
        free_shares();
        throw;
    }
    free_shares();
    nccl_destroy_all(comms, o.timeout_s);

    // 4. The check against the reference, the speedup and the RESULT line.
    report(p, run, o.no_reference ? nullptr : &reference, o.json);
    return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
    return run_program("04_nccl_threads", [&]() -> int {
        Problem problem = preset_from_args(argc, argv);
        Options options;
        ArgParser parser("04_nccl_threads",
                         "Shot-parallel FWI on all GPUs of one process; gradients combined with ncclAllReduce, driven "
                         "by each GPU's own thread or, in one group, by GPU 0's thread.");
        add_problem_flags(parser, problem);
        add_shot_parallel_flags(parser, options);
        parser.add_switch("--verbose", &options.verbose, "print how to see which transport NCCL uses");
        parser.add_int("--gpus", &options.gpus, 0, 64, "GPUs to use, 0 = all visible (at most one per shot)");
        parser.add_choice("--driver", &options.driver, {"threads", "group"},
                          "who issues the NCCL calls: each GPU's thread its own, or GPU 0's thread all of them between "
                          "ncclGroupStart/End");
        if (!parser.parse(argc, argv)) return kExitOk;
        refuse_launch_as_several_ranks(
            "04 drives every GPU from one process, a thread each: run it without mpirun (05 runs a rank per GPU)");
        validate(problem, parser);
        return run(problem, options);
    });
}
