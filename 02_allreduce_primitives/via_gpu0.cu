// via_gpu0: the textbook allreduce. Every GPU copies its buffer to GPU 0, GPU 0 sums, every GPU
// copies the sum back. GPU 0's links carry (n-1) buffers in and (n-1) out, each other GPU's only its own
// buffer and the sum, so its bus bandwidth falls as GPUs are added: the baseline the other variants improve on.
#include "allreduce_variant.hpp"
#include "cuda_check.hpp"
#include "errors.hpp"
#include "sum_kernel.cuh"

namespace fwi {

namespace {

class ViaGpu0 final : public AllreduceVariant {
public:
    explicit ViaGpu0(GpuGroup& group) : AllreduceVariant(group) {
        for (int rank = 1; rank < group.size(); ++rank) {
            gathered_.emplace_back(0, group.capacity());  // rank r's buffer, copied to GPU 0
            gathered_event_.emplace_back(rank);
            returned_event_.emplace_back(rank);
        }
        summed_ = CudaEvent(0);
    }

    std::string name() const override { return "via_gpu0"; }
    std::string description() const override { return "copy every buffer to GPU 0, sum there, copy the sum back"; }

    void run(size_t count) override {
        const int n = group_.size();
        const size_t bytes = count * sizeof(float);
        SumOperands sum{};
        sum.inputs[0] = group_.send(0);
        sum.input_count = n;
        sum.outputs[0] = group_.recv(0);
        sum.output_count = 1;
        for (int rank = 1; rank < n; ++rank) {
            CUDA_CHECK(cudaSetDevice(rank));
            float* copy_on_gpu0 = gathered_[rank - 1].data();
            CUDA_CHECK(cudaMemcpyPeerAsync(copy_on_gpu0, 0, group_.send(rank), rank, bytes, group_.stream(rank)));
            CUDA_CHECK(cudaEventRecord(gathered_event_[rank - 1].get(), group_.stream(rank)));
            sum.inputs[rank] = copy_on_gpu0;
        }
        CUDA_CHECK(cudaSetDevice(0));
        for (int rank = 1; rank < n; ++rank)
            CUDA_CHECK(cudaStreamWaitEvent(group_.stream(0), gathered_event_[rank - 1].get(), 0));
        launch_sum(sum, count, group_.multiprocessors(0), group_.stream(0));
        CUDA_CHECK(cudaEventRecord(summed_.get(), group_.stream(0)));
        for (int rank = 1; rank < n; ++rank) {
            CUDA_CHECK(cudaSetDevice(rank));
            CUDA_CHECK(cudaStreamWaitEvent(group_.stream(rank), summed_.get(), 0));
            CUDA_CHECK(cudaMemcpyPeerAsync(group_.recv(rank), rank, group_.recv(0), 0, bytes, group_.stream(rank)));
            CUDA_CHECK(cudaEventRecord(returned_event_[rank - 1].get(), group_.stream(rank)));
        }
        // GPU 0's result must stay untouched until every copy back has read it.
        CUDA_CHECK(cudaSetDevice(0));
        for (int rank = 1; rank < n; ++rank)
            CUDA_CHECK(cudaStreamWaitEvent(group_.stream(0), returned_event_[rank - 1].get(), 0));
    }

private:
    std::vector<DeviceBuffer<float>> gathered_;
    std::vector<CudaEvent> gathered_event_, returned_event_;  // on GPU r, for r = 1..n-1
    CudaEvent summed_;                                        // on GPU 0
};

}  // namespace

std::unique_ptr<AllreduceVariant> make_via_gpu0(GpuGroup& group) { return std::make_unique<ViaGpu0>(group); }

}  // namespace fwi
