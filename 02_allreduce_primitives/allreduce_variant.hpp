// The interface every allreduce variant implements (nccl-tests' shape: the harness owns buffers,
// timing, checking and the table; a variant supplies only how it reduces), and the factory.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "gpu_group.hpp"

namespace fwi {

struct VariantOptions {
    int ring_chunks = 4;                      // the ring's pipeline depth: chunks per segment
    size_t one_shot_max_bytes = 512 * 1024;   // p2p_kernel: one-shot up to this size, two-shot above
};

class AllreduceVariant {
public:
    virtual ~AllreduceVariant() = default;
    virtual const char* name() const = 0;
    virtual const char* description() const = 0;
    // Why the variant cannot run on this group of GPUs; empty when it can.
    virtual std::string unavailable_reason() const { return ""; }
    // Enqueues recv[r] = sum over all GPUs of send[r] for `count` floats (count <= group capacity).
    // It starts and ends on every GPU's group stream: once GPU r's stream passes the end, GPU r's
    // result is complete and no GPU touches GPU r's buffers any more.
    virtual void enqueue(size_t count) = 0;
    // Which algorithm runs at this size, when the variant chooses one by size ("" otherwise).
    virtual std::string algorithm(size_t /*count*/) const { return ""; }
};

const std::vector<std::string>& variant_names();  // via_gpu0, ring, p2p_kernel, nccl

// Builds a variant for the group (its scratch memory sized for the group's capacity).
std::unique_ptr<AllreduceVariant> make_variant(const std::string& name, GpuGroup& group,
                                               const VariantOptions& options);

// One factory per variant file.
std::unique_ptr<AllreduceVariant> make_via_gpu0(GpuGroup& group);
std::unique_ptr<AllreduceVariant> make_ring(GpuGroup& group, int chunks_per_segment);
std::unique_ptr<AllreduceVariant> make_p2p_kernel(GpuGroup& group, size_t one_shot_max_bytes);
std::unique_ptr<AllreduceVariant> make_nccl(GpuGroup& group);

}  // namespace fwi
