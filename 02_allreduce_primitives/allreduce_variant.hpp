// The base every allreduce variant of this lesson derives from, and the factory. nccl-tests' shape: the
// sweep (common/allreduce_sweep.hpp) owns the sizes, timing, tally and table; this base adds what the
// variants share on a group of GPUs; each variant file supplies only how it reduces.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "allreduce_sweep.hpp"
#include "cuda_timing.hpp"
#include "gpu_group.hpp"

namespace fwi {

struct VariantOptions {
    int ring_chunks = 4;                     // the ring's pipeline depth: chunks per segment
    size_t one_shot_max_bytes = 512 * 1024;  // p2p_kernel: one-shot up to this size, two-shot above
};

// One allreduce over every GPU of the group, driven by this one process: the sweep's only participant.
// The base fills the inputs, poisons and checks the results on every GPU, waits with the group's timeout,
// and times a batch with CUDA events on GPU 0 around all GPUs' streams.
class AllreduceVariant : public AllreduceSweepVariant {
public:
    explicit AllreduceVariant(GpuGroup& group);

    // Enqueues recv[r] = sum over all GPUs of send[r] for `count` floats (count <= group capacity).
    // It starts and ends on every GPU's group stream: once GPU r's stream passes the end, GPU r's
    // result is complete and no GPU touches GPU r's buffers any more.
    void run(size_t count) override = 0;

    void setup(size_t count) override;
    void wait() override;
    long long count_wrong(size_t count) override;
    void begin_batch() override;
    double end_batch() override;

protected:
    GpuGroup& group_;

private:
    std::unique_ptr<CudaEventTimer> batch_timer_;  // on GPU 0
};

const std::vector<std::string>& variant_names();  // via_gpu0, ring, p2p_kernel, nccl

// Builds a variant for the group (its scratch memory sized for the group's capacity).
std::unique_ptr<AllreduceVariant> make_variant(const std::string& name, GpuGroup& group, const VariantOptions& options);

// One factory per variant file.
std::unique_ptr<AllreduceVariant> make_via_gpu0(GpuGroup& group);
std::unique_ptr<AllreduceVariant> make_ring(GpuGroup& group, int chunks_per_segment);
std::unique_ptr<AllreduceVariant> make_p2p_kernel(GpuGroup& group, size_t one_shot_max_bytes);
std::unique_ptr<AllreduceVariant> make_nccl(GpuGroup& group);

}  // namespace fwi
