#include "allreduce_bench.hpp"

#include <thrust/count.h>
#include <thrust/execution_policy.h>
#include <thrust/fill.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/tabulate.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <vector>

#include "bandwidth.hpp"
#include "bench_values.hpp"
#include "cuda_check.hpp"
#include "cuda_timing.hpp"
#include "device.hpp"
#include "errors.hpp"
#include "nccl_check.hpp"
#include "nccl_comm.hpp"
#include "output.hpp"
#include "problem.hpp"
#include "size_sweep.hpp"
#include "timing.hpp"

namespace fwi {

namespace {

// The bench's inputs and the check of a result, as Thrust functors over the element index.
struct BenchInput {
    int rank;
    __host__ __device__ float operator()(long long index) const { return bench_input(rank, size_t(index)); }
};

struct WrongResult {
    const float* result;
    int ranks;
    __host__ __device__ bool operator()(size_t index) const { return !bench_result_ok(result[index], ranks, index); }
};

// Buffers for the largest size, on the current device.
class Bench {
public:
    Bench(ncclComm_t comm, int rank, int ranks, size_t max_count, double timeout_s)
        : comm_(comm), rank_(rank), ranks_(ranks), timeout_s_(timeout_s), send_(max_count), recv_(max_count),
          wrong_(1) {
        CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    }
    ~Bench() { cudaStreamDestroy(stream_); }
    Bench(const Bench&) = delete;
    Bench& operator=(const Bench&) = delete;

    // On a non-blocking communicator a call may return ncclInProgress (NCCL is still connecting, for
    // instance); nothing may be issued on the communicator or its stream before NCCL has finished
    // issuing it, so wait for that here. Once connected, the calls return ncclSuccess and run back to back.
    void enqueue_allreduce(size_t count) {
        ncclResult_t status = ncclSuccess;
        NCCL_CHECK(status = ncclAllReduce(send_.data(), recv_.data(), count, ncclFloat, ncclSum, comm_, stream_));
        if (status == ncclInProgress)
            wait_for_nccl({comm_}, {}, "issuing ncclAllReduce of " + std::to_string(count * sizeof(float)) + " bytes",
                          timeout_s_);
    }
    void wait(size_t count) {
        wait_for_nccl({comm_}, {stream_}, "ncclAllReduce of " + std::to_string(count * sizeof(float)) + " bytes",
                      timeout_s_);
    }
    // One allreduce into a poisoned output; returns this rank's wrong elements.
    long long run_checked(size_t count) {
        thrust::tabulate(thrust::cuda::par_nosync.on(stream_), send_.data(), send_.data() + count, BenchInput{rank_});
        thrust::fill(thrust::cuda::par_nosync.on(stream_), recv_.data(), recv_.data() + count,
                     std::numeric_limits<float>::quiet_NaN());  // never a right answer
        enqueue_allreduce(count);
        return count_wrong(count);
    }
    // This rank's wrong elements in the output of the last allreduce, counted on the device after waiting
    // for it (Thrust's count waits for the stream, which must then hold nothing that could hang).
    long long count_wrong(size_t count) {
        wait(count);
        return thrust::count_if(thrust::cuda::par.on(stream_), thrust::counting_iterator<size_t>(0),
                                thrust::counting_iterator<size_t>(count), WrongResult{recv_.data(), ranks_});
    }
    // Time of one allreduce from a batch of `iters` back to back, between two events on this rank's stream.
    double time_batch(size_t count, int iters) {
        CudaEventTimer timer;
        timer.start(stream_);
        for (int i = 0; i < iters; ++i) enqueue_allreduce(count);
        timer.stop(stream_);
        wait(count);  // never blocks without a timeout; the events are complete after it
        return timer.seconds() / iters;
    }
    // A count summed over the ranks by NCCL itself.
    long long sum_over_ranks(long long count) {
        wrong_.upload({count}, stream_);
        NCCL_CHECK(ncclAllReduce(wrong_.data(), wrong_.data(), 1, ncclInt64, ncclSum, comm_, stream_));
        wait_for_nccl({comm_}, {stream_}, "ncclAllReduce of the wrong-element counts", timeout_s_);
        return wrong_.download(1, stream_)[0];
    }

private:
    ncclComm_t comm_;
    int rank_, ranks_;
    double timeout_s_;
    DeviceBuffer<float> send_, recv_;
    DeviceBuffer<long long> wrong_;
    cudaStream_t stream_ = nullptr;
};

// Allreduces in one timed batch of `bytes`: `iters`, fewer when a batch would move more than 1 GiB.
int batch_iterations(size_t bytes, int iters) {
    constexpr size_t kBatchBytes = size_t(1) << 30;
    return static_cast<int>(std::clamp<size_t>(kBatchBytes / std::max<size_t>(bytes, 1), 1, iters));
}

}  // namespace

void add_bench_flags(ArgParser& parser, BenchOptions& options) {
    parser.add_int("--min-bytes", &options.min_bytes, 4, 1 << 30, "bench: smallest buffer size in bytes");
    parser.add_int("--max-bytes", &options.max_bytes, 4, 1 << 30, "bench: largest buffer size in bytes");
    parser.add_double("--step-factor", &options.step_factor, 1.01, 1024,
                      "bench: each size is this factor times the last");
    parser.add_int("--warmup", &options.warmup, 0, 1000, "bench: untimed allreduces per size before timing");
    parser.add_int("--iters", &options.iters, 1, 10000,
                   "bench: allreduces per timed batch (fewer when a batch would move more than 1 GiB)");
    parser.add_int("--repeats", &options.repeats, 1, 100, "bench: timed batches per size; the median is reported");
}

void validate_bench_options(const BenchOptions& options) {
    if (options.min_bytes > options.max_bytes)
        throw UsageError("--min-bytes (" + std::to_string(options.min_bytes) + ") must not exceed --max-bytes (" +
                         std::to_string(options.max_bytes) + ")");
}

long long run_allreduce_bench(ncclComm_t comm, int rank, int ranks, const BenchOptions& options, double timeout_s,
                              const std::string& json_path) {
    const Problem default_problem;
    const size_t fwi_bytes = default_problem.model_cells() * sizeof(float);
    const std::vector<size_t> sizes =
        sweep_byte_sizes(options.min_bytes, options.max_bytes, options.step_factor, fwi_bytes);
    Bench bench(comm, rank, ranks, sizes.back() / sizeof(float), timeout_s);
    if (rank == 0)
        print_bandwidth_table_header("nccl, one process per GPU (" + std::to_string(ranks) +
                                     " ranks, bootstrapped over MPI): ncclAllReduce, out of place");
    JsonObject by_bytes;
    long long wrong_total = 0;
    for (const size_t bytes : sizes) {
        const size_t count = bytes / sizeof(float);
        long long wrong_here = bench.run_checked(count);
        const int iters = batch_iterations(bytes, options.iters);
        for (int i = 0; i < std::min(options.warmup, iters); ++i) bench.enqueue_allreduce(count);
        bench.wait(count);
        std::vector<double> samples;
        for (int repeat = 0; repeat < options.repeats; ++repeat) samples.push_back(bench.time_batch(count, iters));
        wrong_here += bench.count_wrong(count);  // back-to-back runs must leave the right answer too
        const long long wrong = bench.sum_over_ranks(wrong_here);
        wrong_total += wrong;
        const double seconds = median(samples);
        if (rank == 0) {
            const std::string note = bytes == fwi_bytes ? "<- FWI gradient " + std::to_string(default_problem.nz) +
                                                              "x" + std::to_string(default_problem.nx) + " floats"
                                                        : "";
            print_bandwidth_table_row(bytes, seconds, ranks, wrong, note);
            JsonObject row;
            row.add("time_us", seconds * 1e6)
                .add("algbw_GBps", algorithm_bandwidth(bytes, seconds) / 1e9)
                .add("busbw_GBps", bus_bandwidth(bytes, seconds, ranks) / 1e9)
                .add("wrong", wrong);
            by_bytes.add(std::to_string(bytes), row);
        }
    }
    if (rank == 0) {
        JsonObject result;
        result.add("pattern", "05_nccl_mpi")
            .add("variant", "bench-allreduce")
            .add("gpus", ranks)
            .add("ranks", ranks)
            .add("nccl", nccl_version_string())
            .add("by_bytes", by_bytes)
            .add("verified", wrong_total == 0);
        emit_result(result, json_path);
    }
    return wrong_total;
}

}  // namespace fwi
