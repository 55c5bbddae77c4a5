#include "allreduce_bench.hpp"

#include <thrust/count.h>
#include <thrust/execution_policy.h>
#include <thrust/fill.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/tabulate.h>

#include <limits>
#include <vector>

#include "cuda_check.hpp"
#include "cuda_timing.hpp"
#include "gpu_resources.hpp"
#include "nccl_comm.hpp"

namespace fwi {

namespace {

// The sweep's inputs and the check of a result, as Thrust functors over the element index.
struct SweepInput {
    int rank;
    __host__ __device__ float operator()(long long index) const { return allreduce_input(rank, size_t(index)); }
};

struct WrongResult {
    const float* result;
    int ranks;
    __host__ __device__ bool operator()(size_t index) const {
        return !(result[index] == allreduce_expected_sum(ranks, index));  // NaN poison never compares equal
    }
};

// This rank's part of ncclAllReduce, out of place, on its own stream, with buffers for the largest size.
class NcclSweepVariant final : public AllreduceSweepVariant {
public:
    NcclSweepVariant(ncclComm_t comm, int rank, int ranks, size_t max_count, double timeout_s, const TestFault& fault)
        : comm_(comm),
          rank_(rank),
          ranks_(ranks),
          timeout_s_(timeout_s),
          fault_(fault),
          send_(max_count),
          recv_(max_count),
          stream_(current_device()) {}

    std::string name() const override { return "nccl"; }
    std::string description() const override {
        return "ncclAllReduce, one process per GPU (" + std::to_string(ranks_) +
               " ranks, bootstrapped over MPI), out of place";
    }
    void setup(size_t count) override {
        thrust::tabulate(thrust::cuda::par_nosync.on(stream_.get()), send_.data(), send_.data() + count,
                         SweepInput{rank_});
        thrust::fill(thrust::cuda::par_nosync.on(stream_.get()), recv_.data(), recv_.data() + count,
                     std::numeric_limits<float>::quiet_NaN());
    }
    // With an NCCL before 2.18 the communicator is a non-blocking one, on which a call may return
    // ncclInProgress; nothing may be issued on it or its stream before NCCL has finished issuing the call
    // (wait_until_issued). On the blocking one (nccl_comm.hpp) every call returns ncclSuccess once its
    // kernel is on the stream, and the calls run back to back. A call that fails (a rank that died, reported
    // at the next call) aborts the communicator: the batch's calls before it would wait for that rank.
    void run(size_t count) override {
        last_count_ = count;
        const ncclResult_t status = nccl_check_or_abort(
            ncclAllReduce(send_.data(), recv_.data(), count, ncclFloat, ncclSum, comm_, stream_.get()), {comm_},
            "ncclAllReduce of " + std::to_string(count * sizeof(float)) + " bytes");
        wait_until_issued(status, {comm_}, "ncclAllReduce of " + std::to_string(count * sizeof(float)) + " bytes",
                          timeout_s_);
    }
    void wait() override {
        wait_for_nccl({comm_}, {stream_.get()},
                      "ncclAllReduce of " + std::to_string(last_count_ * sizeof(float)) + " bytes", timeout_s_);
    }
    // Counted on the device after wait(): Thrust's count waits for the stream, which must then hold nothing
    // that could hang.
    long long count_wrong(size_t count) override {
        return thrust::count_if(thrust::cuda::par.on(stream_.get()), thrust::counting_iterator<size_t>(0),
                                thrust::counting_iterator<size_t>(count), WrongResult{recv_.data(), ranks_});
    }
    void begin_batch() override {
        fail_before_first_timing();
        batch_timer_.start(stream_.get());
    }
    double time_alone(size_t count) override {
        fail_before_first_timing();
        return AllreduceSweepVariant::time_alone(count);
    }
    double end_batch() override {
        batch_timer_.stop(stream_.get());
        wait();  // with the timeout; the events are complete after it
        return batch_timer_.seconds();
    }

    // Host values reduced element-wise over the ranks by NCCL (up, reduce, down), under the timed wait.
    void reduce_over_ranks(std::vector<double>& values, ReduceOp op) {
        DeviceBuffer<double> buffer(values.size());
        buffer.upload(values, stream_.get());
        const std::string what = "ncclAllReduce of the sweep's line-up, times or #wrong";
        nccl_check_or_abort(ncclAllReduce(buffer.data(), buffer.data(), values.size(), ncclDouble,
                                          op == ReduceOp::sum ? ncclSum : ncclMax, comm_, stream_.get()),
                            {comm_}, what);
        wait_for_nccl({comm_}, {stream_.get()}, what, timeout_s_);
        values = buffer.download(values.size(), stream_.get());
    }

private:
    // A test hook, not part of the benchmark: with --test-fault one rank fails before its first timed
    // allreduce, in a batch or (--isolated) alone.
    void fail_before_first_timing() {
        if (!timing_started_) trigger_test_fault(fault_, FaultPoint::allreduce, rank_, timeout_s_);
        timing_started_ = true;
    }

    ncclComm_t comm_;
    int rank_, ranks_;
    double timeout_s_;
    TestFault fault_;
    bool timing_started_ = false;
    DeviceBuffer<float> send_, recv_;
    CudaStream stream_;
    CudaEventTimer batch_timer_;
    size_t last_count_ = 0;  // of the last allreduce started, for the message of a wait that times out
};

}  // namespace

long long run_bench_allreduce(ncclComm_t comm, int rank, int ranks, const AllreduceSweepOptions& options,
                              double timeout_s, const std::string& json_path, const TestFault& fault) {
    NcclSweepVariant variant(comm, rank, ranks, allreduce_sweep_sizes(options).back() / sizeof(float), timeout_s,
                             fault);
    SweepLayout layout;
    layout.pattern = "05_nccl_mpi";
    layout.gpus = layout.ranks = ranks;
    layout.reports = rank == 0;
    layout.json_path = json_path;
    layout.reduce = [&variant](std::vector<double>& values, ReduceOp op) { variant.reduce_over_ranks(values, op); };
    return run_allreduce_sweep(variant, options, layout).wrong_total();
}

}  // namespace fwi
