// 04_nccl_threads: one process drives every GPU, and NCCL combines their gradients.
//
// Purpose: the shot-parallel FWI step with the combine done by NCCL, GPU to GPU over NVLink, instead of
// through host memory. Each GPU computes the gradient of its shots; one ncclAllReduce (a sum) leaves the
// gradient over all shots on every GPU; every GPU applies the same update to its copy of the model.
// What you learn: one communicator per GPU in one process (what ncclCommInitAll does, here with
// non-blocking communicators so that no wait can hang), and the two ways to drive them:
//   --driver threads  one host thread per GPU; each thread issues its own GPU's ncclAllReduce
//   --driver group    one thread issues every GPU's ncclAllReduce between ncclGroupStart and
//                     ncclGroupEnd; without the group, the first call could wait for the other GPUs'
//                     calls, which that same thread never gets to make: a deadlock
// In both, the local gradients are computed by one thread per GPU: GpuPropagator::gradient() returns
// host vectors, so it blocks its thread until its GPU is done, and one thread would run the GPUs one
// after the other. The drivers differ only in how the NCCL calls are issued.
// What you should see: the misfit falling, each iteration's gradient and combine time, the speedup over
// the single-GPU reference this program runs first, and "verified".
#include <nccl.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cuda_check.hpp"
#include "device.hpp"
#include "errors.hpp"
#include "nccl_check.hpp"
#include "nccl_comm.hpp"
#include "problem.hpp"
#include "shot_parallel.hpp"
#include "timing.hpp"

using namespace fwi;

namespace {

struct Options : ShotParallelOptions {
    int gpus = 0;
    std::string driver = "threads";
};

using Shares = std::vector<std::unique_ptr<GpuShare>>;

// Runs fn(g) for every GPU g in its own host thread, with device g current, and waits for all of them.
// An exception in one thread neither ends the process (std::terminate) nor leaves the others running:
// every thread is joined, then the first error to happen is rethrown.
void on_each_gpu(int gpus, const std::function<void(int)>& fn) {
    std::mutex mutex;
    std::exception_ptr first_error;
    const auto record = [&](std::exception_ptr error) {
        std::lock_guard<std::mutex> lock(mutex);
        if (!first_error) first_error = error;
    };
    std::vector<std::thread> threads;
    try {
        for (int g = 0; g < gpus; ++g)
            threads.emplace_back([&, g] {
                try {
                    CUDA_CHECK(cudaSetDevice(g));
                    fn(g);
                } catch (...) {
                    record(std::current_exception());
                }
            });
    } catch (...) {  // a thread could not be started: the ones that were must still be joined
        record(std::current_exception());
    }
    for (auto& thread : threads) thread.join();
    if (first_error) std::rethrow_exception(first_error);
}

// One GPU's part of the combine: gradient and misfit summed in place over all GPUs. A sum, so the result
// is the gradient over all shots, exactly what one GPU computes alone.
void enqueue_allreduce(const GpuShare& share, ncclComm_t comm) {
    NCCL_CHECK(ncclAllReduce(share.gradient(), share.gradient(), share.gradient_count(), ncclFloat, ncclSum, comm,
                             share.stream()));
    NCCL_CHECK(ncclAllReduce(share.misfit(), share.misfit(), 1, ncclDouble, ncclSum, comm, share.stream()));
}

// --driver threads: called by GPU g's own thread. The group only bundles this GPU's two allreduces into
// one launch; the threads need no group between them, since each one's call may wait for the others'
// calls without keeping them from being made.
void combine_from_own_thread(const Shares& shares, const std::vector<ncclComm_t>& comms, int g, double timeout_s) {
    NCCL_CHECK(ncclGroupStart());
    enqueue_allreduce(*shares[g], comms[g]);
    NCCL_CHECK(ncclGroupEnd());
    wait_for_nccl({comms[g]}, {shares[g]->stream()}, "ncclAllReduce of the gradient (threads driver, GPU " +
                  std::to_string(g) + ")", timeout_s);
}

// --driver group: one thread issues the allreduces of every GPU. Inside ncclGroupStart/ncclGroupEnd the
// calls only record the work; ncclGroupEnd launches them all together, so no call waits for a GPU whose
// call has not been made yet.
void combine_from_one_thread(const Shares& shares, const std::vector<ncclComm_t>& comms, double timeout_s) {
    std::vector<cudaStream_t> streams;
    NCCL_CHECK(ncclGroupStart());
    for (size_t g = 0; g < shares.size(); ++g) {
        enqueue_allreduce(*shares[g], comms[g]);
        streams.push_back(shares[g]->stream());
    }
    NCCL_CHECK(ncclGroupEnd());
    wait_for_nccl(comms, streams, "ncclAllReduce of the gradient (group driver)", timeout_s);
}

// Host clock readings of one iteration: per GPU, when its local gradient was staged and when the
// combined gradient was on its host.
struct IterationClock {
    explicit IterationClock(int gpus) : local_done(gpus), combined(gpus) {}
    HostTimer timer;
    std::vector<double> local_done, combined;

    double gradient_seconds() const { return *std::max_element(combined.begin(), combined.end()); }
    // From the moment the last GPU is ready: what the combine itself costs, without load imbalance.
    double combine_seconds() const {
        return gradient_seconds() - *std::max_element(local_done.begin(), local_done.end());
    }
};

// The combined gradient and misfit as each GPU received them.
struct Combined {
    explicit Combined(int gpus) : gradients(gpus), misfits(gpus) {}
    std::vector<std::vector<float>> gradients;
    std::vector<double> misfits;
};

void iterate(const Options& o, const Shares& shares, const std::vector<ncclComm_t>& comms, IterationClock& clock,
             Combined& combined) {
    const int gpus = static_cast<int>(shares.size());
    const auto download_and_update = [&](int g) {
        shares[g]->download_combined(combined.gradients[g], combined.misfits[g]);
        clock.combined[g] = clock.timer.seconds();
        shares[g]->update(combined.gradients[g]);
    };
    if (o.driver == "threads") {
        on_each_gpu(gpus, [&](int g) {
            shares[g]->compute_and_stage();
            clock.local_done[g] = clock.timer.seconds();
            combine_from_own_thread(shares, comms, g, o.timeout_s);
            download_and_update(g);
        });
    } else {
        on_each_gpu(gpus, [&](int g) {
            shares[g]->compute_and_stage();
            clock.local_done[g] = clock.timer.seconds();
        });
        combine_from_one_thread(shares, comms, o.timeout_s);
        on_each_gpu(gpus, download_and_update);
    }
}

// The first collective also sets up NCCL's connections between the GPUs: done once, untimed.
void warm_up_combine(const Options& o, const Shares& shares, const std::vector<ncclComm_t>& comms) {
    if (o.driver == "threads")
        on_each_gpu(static_cast<int>(shares.size()),
                    [&](int g) { combine_from_own_thread(shares, comms, g, o.timeout_s); });
    else
        combine_from_one_thread(shares, comms, o.timeout_s);
}

void print_setup(const Problem& p, const Options& o, const std::vector<ShotRange>& split) {
    const int gpus = static_cast<int>(split.size());
    std::printf("04_nccl_threads: %s on %d GPU%s, driver %s, %s\n", p.summary().c_str(), gpus, gpus > 1 ? "s" : "",
                o.driver.c_str(), nccl_version_string().c_str());
    for (int g = 0; g < gpus; ++g)
        std::printf("  GPU %d: %s, shots %d..%d\n", g, describe_device(g).c_str(), split[g].first,
                    split[g].first + split[g].count - 1);
    if (o.verbose) std::printf("  %s\n", nccl_transport_hint().c_str());
    std::fflush(stdout);
}

int run(const Problem& p, const Options& o) {
    // The shot split is checked before any GPU is touched (more GPUs than shots is a usage error).
    const int gpus = o.gpus > 0 ? o.gpus : std::max(visible_gpu_count(), 1);
    const std::vector<ShotRange> split = split_all_shots(p.nshots, gpus);
    require_gpus(gpus);
    print_setup(p, o, split);

    ReferenceRun reference;
    if (!o.no_reference) {
        CUDA_CHECK(cudaSetDevice(0));
        reference = run_reference(p, o.iterations);  // its GPU memory is freed before the shares take theirs
    }

    std::vector<int> devices;
    for (int g = 0; g < gpus; ++g) devices.push_back(g);
    const std::vector<ncclComm_t> comms = nccl_init_all(devices, o.timeout_s);
    Shares shares(gpus);
    on_each_gpu(gpus, [&](int g) { shares[g] = std::make_unique<GpuShare>(p, split[g]); });
    warm_up_combine(o, shares, comms);

    ShotParallelRun result;
    result.pattern = "04_nccl_threads";
    result.variant = o.driver;
    result.gpus = gpus;
    Combined combined(gpus);
    for (int it = 0; it < o.iterations; ++it) {
        IterationClock clock(gpus);
        iterate(o, shares, comms, clock, combined);
        result.iteration_seconds.push_back(clock.timer.seconds());
        result.gradient_seconds.push_back(clock.gradient_seconds());
        result.combine_seconds.push_back(clock.combine_seconds());
        if (it == 0) {
            result.first_gradient = combined.gradients[0];
            result.first_misfit = combined.misfits[0];
        }
        print_iteration(it, o.iterations, combined.misfits[0], result.gradient_seconds.back(),
                        result.combine_seconds.back(), result.iteration_seconds.back());
    }
    result.final_model = shares[0]->velocity();
    for (const auto& share : shares)
        result.models_identical = result.models_identical && share->velocity() == result.final_model;

    nccl_destroy_all(comms, o.timeout_s);
    for (int g = 0; g < gpus; ++g) {  // free each GPU's memory with its device current
        CUDA_CHECK(cudaSetDevice(g));
        shares[g].reset();
    }
    verify_and_report(p, result, o.no_reference ? nullptr : &reference, o.json);
    return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
    return run_program("04_nccl_threads", [&]() -> int {
        Problem problem = preset_from_args(argc, argv);
        Options options;
        ArgParser parser("04_nccl_threads",
                         "Shot-parallel FWI on all GPUs of one process; gradients combined with ncclAllReduce, "
                         "driven by one thread per GPU or by one thread with group calls.");
        add_problem_flags(parser, problem);
        add_shot_parallel_flags(parser, options);
        parser.add_int("--gpus", &options.gpus, 0, 64, "GPUs to use, 0 = all visible");
        parser.add_choice("--driver", &options.driver, {"threads", "group"},
                          "who issues the NCCL calls: one thread per GPU, or one thread with ncclGroupStart/End");
        if (!parser.parse(argc, argv)) return kExitOk;
        validate(problem);
        return run(problem, options);
    });
}
