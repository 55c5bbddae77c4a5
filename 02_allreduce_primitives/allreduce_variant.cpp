#include "allreduce_variant.hpp"

#include "cuda_check.hpp"
#include "errors.hpp"

namespace fwi {

AllreduceVariant::AllreduceVariant(GpuGroup& group) : group_(group) {
    CUDA_CHECK(cudaSetDevice(0));  // the timer's events are recorded on GPU 0's stream
    batch_timer_ = std::make_unique<CudaEventTimer>();
}

void AllreduceVariant::setup(size_t count) {
    group_.fill_inputs(count);
    group_.poison_outputs(count);
}

void AllreduceVariant::wait() { group_.synchronize(name()); }

long long AllreduceVariant::count_wrong(size_t count) { return group_.count_wrong(count); }

// GPU 0's stream brackets the batch: every other stream waits for its start and it waits for their end,
// so one pair of events on it times all GPUs.
void AllreduceVariant::begin_batch() {
    CUDA_CHECK(cudaSetDevice(0));
    batch_timer_->start(group_.stream(0));
    group_.fork_from_first();
}

double AllreduceVariant::end_batch() {
    group_.join_into_first();
    CUDA_CHECK(cudaSetDevice(0));
    batch_timer_->stop(group_.stream(0));
    wait();  // with the timeout; the events are complete after it
    return batch_timer_->seconds();
}

const std::vector<std::string>& variant_names() {
    static const std::vector<std::string> names{"via_gpu0", "ring", "p2p_kernel", "nccl"};
    return names;
}

std::unique_ptr<AllreduceVariant> make_variant(const std::string& name, GpuGroup& group,
                                               const VariantOptions& options) {
    if (name == "via_gpu0") return make_via_gpu0(group);
    if (name == "ring") return make_ring(group, options.ring_chunks);
    if (name == "p2p_kernel") return make_p2p_kernel(group, options.one_shot_max_bytes);
    if (name == "nccl") return make_nccl(group);
    throw UsageError("--variants: unknown variant '" + name + "'; allowed via_gpu0, ring, p2p_kernel, nccl");
}

}  // namespace fwi
