#include "harness.hpp"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "bandwidth.hpp"
#include "cuda_check.hpp"
#include "cuda_timing.hpp"
#include "errors.hpp"
#include "timing.hpp"

namespace fwi {

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

int iterations_for(size_t bytes, int iters) {
    constexpr size_t kBatchBytes = size_t(1) << 30;
    return static_cast<int>(std::clamp<size_t>(kBatchBytes / std::max<size_t>(bytes, 1), 1, iters));
}

long long run_once_and_count_wrong(AllreduceVariant& variant, GpuGroup& group, size_t count) {
    group.fill_inputs(count);
    group.poison_outputs(count);
    variant.enqueue(count);
    group.synchronize(variant.name());
    return group.count_wrong(count);
}

double time_batch(AllreduceVariant& variant, GpuGroup& group, size_t count, int iters) {
    CUDA_CHECK(cudaSetDevice(0));
    CudaEventTimer timer;
    timer.start(group.stream(0));
    group.fork_from_first();
    for (int i = 0; i < iters; ++i) variant.enqueue(count);
    group.join_into_first();
    CUDA_CHECK(cudaSetDevice(0));
    timer.stop(group.stream(0));
    group.synchronize(variant.name());
    return timer.seconds() / iters;
}

Measurement measure(AllreduceVariant& variant, GpuGroup& group, size_t count, const TimingOptions& options) {
    Measurement result;
    result.count = count;
    result.algorithm = variant.algorithm(count);
    result.wrong = run_once_and_count_wrong(variant, group, count);

    const int iters = iterations_for(count * sizeof(float), options.iters);
    for (int i = 0; i < std::min(options.warmup, iters); ++i) variant.enqueue(count);
    group.synchronize(variant.name());
    std::vector<double> samples;
    for (int repeat = 0; repeat < options.repeats; ++repeat) samples.push_back(time_batch(variant, group, count, iters));
    result.seconds = median(samples);

    // Back-to-back runs must leave the right answer too (a missing dependency between runs shows here).
    result.wrong += group.count_wrong(count);
    return result;
}

void print_table_header(const AllreduceVariant& variant) {
    print_bandwidth_table_header(std::string(variant.name()) + ": " + variant.description());
}

void print_table_row(const Measurement& m, int ranks, const std::string& note) {
    print_bandwidth_table_row(m.count * sizeof(float), m.seconds, ranks, m.wrong, note);
}

}  // namespace fwi
