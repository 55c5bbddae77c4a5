// p2p_kernel: one kernel per GPU that reads (and writes) the peers' buffers directly over NVLink,
// with the GPUs synchronising among themselves through flags in peer memory, never through the host.
//   one-shot: every GPU loads every GPU's input and sums all of it. One kernel, one barrier before
//     and after: the fewest steps, so it wins on small buffers where latency rules, but every GPU
//     reads (n-1) whole buffers over its links.
//   two-shot: GPU r sums only segment r (reduce-scatter by direct loads) and stores that sum into
//     every GPU's result (all-gather by direct stores): 2(n-1)/n of the buffer per link, like the ring.
//
// The barrier: block b of GPU r writes the call's epoch into flag [b][r] of every peer and waits until
// its own flags [b][p] reach the epoch. Epochs only grow (2e-1 before the sums, 2e after), so
// flags are never reset between calls. Pairing block b with the peers' block b is enough, whatever
// elements each block covers (in two-shot, different ones on each GPU): before the sums, a peer's block b
// has started only once its kernel has, and with it everything queued before on that GPU's stream (its
// input); after the sums, a GPU's kernel ends only once each of its blocks has seen every peer's block of
// the same number finish, so by then every peer has done all its loads from and stores into this GPU's
// buffers, and the next call may refill them. The grid has at most one block per SM, so on a GPU that runs
// nothing else all its blocks are resident at once, and a waiting block never holds the SM that a block it
// waits for needs. (Where other work holds SMs, a block may first wait for that work to end; nothing
// guarantees residency here, as a cooperative launch would within one GPU.) A wait gives up after half of
// --timeout, so a barrier that cannot complete ends in an error, not a hang.
#include <cuda/atomic>

#include "allreduce_variant.hpp"
#include "cuda_check.hpp"
#include "device_sum.cuh"
#include "ring_schedule.hpp"

namespace fwi {

namespace {

constexpr int kMaxBlocks = 1024;  // flag slots per GPU

struct BarrierArgs {
    unsigned long long* flags[kMaxRanks];  // each GPU's flags, [block][rank]
    int ranks;
    int rank;
    unsigned long long timeout_ns;
    volatile int* timeout_report;
};

__device__ unsigned long long global_time_ns() {
    unsigned long long now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    return now;
}

__device__ void barrier_with_peers(const BarrierArgs& barrier, unsigned long long epoch) {
    __syncthreads();  // this block's loads and stores come before its signal
    const int peer = threadIdx.x;
    if (peer < barrier.ranks && peer != barrier.rank) {
        const size_t slot = size_t(blockIdx.x) * kMaxRanks;
        __threadfence_system();
        cuda::atomic_ref<unsigned long long, cuda::thread_scope_system> signal(
            barrier.flags[peer][slot + barrier.rank]);
        signal.store(epoch, cuda::memory_order_release);
        cuda::atomic_ref<unsigned long long, cuda::thread_scope_system> arrived(
            barrier.flags[barrier.rank][slot + peer]);
        const unsigned long long started = global_time_ns();
        while (arrived.load(cuda::memory_order_acquire) < epoch) {
            const unsigned long long waited = global_time_ns() - started;
            // After a millisecond something is wrong: stop at once if another wait already gave up.
            if (waited > 1000000 && *barrier.timeout_report != 0) break;
            if (waited > barrier.timeout_ns) {
                *barrier.timeout_report = 1 + barrier.rank * kMaxRanks + peer;
                __threadfence_system();
                break;
            }
        }
    }
    __syncthreads();
}

// epoch counts calls from 1; the barrier before the sums uses 2*epoch-1, the one after 2*epoch.
__global__ void __launch_bounds__(kSumThreads) p2p_allreduce_kernel(SumOperands operands, size_t begin, size_t end,
                                                                    BarrierArgs barrier, unsigned long long epoch) {
    barrier_with_peers(barrier, 2 * epoch - 1);  // every GPU's input is ready
    sum_range(operands, begin, end);
    barrier_with_peers(barrier, 2 * epoch);  // nobody reads my input or writes my result any more
}

class P2pKernel final : public AllreduceVariant {
public:
    P2pKernel(GpuGroup& group, size_t one_shot_max_bytes)
        : AllreduceVariant(group), one_shot_max_bytes_(one_shot_max_bytes) {
        if (!unavailable_reason().empty()) return;
        max_blocks_ = kMaxBlocks;
        for (int rank = 0; rank < group.size(); ++rank) {
            flags_.emplace_back(rank, size_t(kMaxBlocks) * kMaxRanks);
            CUDA_CHECK(
                cudaMemset(flags_.back().data(), 0, size_t(kMaxBlocks) * kMaxRanks * sizeof(unsigned long long)));
            CUDA_CHECK(cudaDeviceSynchronize());  // the zeroed flags must land before the first kernel
            max_blocks_ = std::min(max_blocks_, group.multiprocessors(rank));
        }
    }

    std::string name() const override { return "p2p_kernel"; }
    std::string description() const override {
        return "kernels load peers' buffers directly; one-shot (all GPUs sum everything) or two-shot (reduce-scatter "
               "by loads, all-gather by stores), GPU-side barriers";
    }
    std::string unavailable_reason() const override {
        if (group_.size() < 2) return "needs 2 or more GPUs with peer access";
        if (group_.peer_access_left_off()) return "needs peer access, left off (--no-peer-access)";
        for (const auto& [rank, peer] : group_.pairs_without_peer_access())
            return "needs peer access between all pairs; GPU " + std::to_string(rank) + " cannot access GPU " +
                   std::to_string(peer);
        return "";
    }
    // Which of the two ran at this size.
    std::string row_note(size_t count) override { return one_shot(count) ? "one-shot" : "two-shot"; }

    void run(size_t count) override {
        const int n = group_.size();
        ++epoch_;
        BarrierArgs barrier{};
        barrier.ranks = n;
        barrier.timeout_ns = static_cast<unsigned long long>(group_.timeout_s() * 0.5e9);
        barrier.timeout_report = group_.timeout_report();
        SumOperands operands{};
        operands.input_count = n;
        for (int rank = 0; rank < n; ++rank) {
            barrier.flags[rank] = flags_[rank].data();
            operands.inputs[rank] = group_.send(rank);
        }
        // Every GPU launches the same number of blocks: block b pairs with block b of every peer.
        const unsigned blocks = sum_blocks(one_shot(count) ? count : split_evenly(count, n, 0, 4).size(), max_blocks_);
        for (int rank = 0; rank < n; ++rank) {
            barrier.rank = rank;
            ElementRange range{0, count};
            if (one_shot(count)) {
                operands.outputs[0] = group_.recv(rank);
                operands.output_count = 1;
            } else {
                range = split_evenly(count, n, rank, 4);
                for (int peer = 0; peer < n; ++peer) operands.outputs[peer] = group_.recv(peer);
                operands.output_count = n;
            }
            CUDA_CHECK(cudaSetDevice(rank));
            p2p_allreduce_kernel<<<blocks, kSumThreads, 0, group_.stream(rank)>>>(operands, range.begin, range.end,
                                                                                  barrier, epoch_);
            CUDA_CHECK_LAUNCH();
        }
    }

private:
    bool one_shot(size_t count) const { return count * sizeof(float) <= one_shot_max_bytes_; }

    size_t one_shot_max_bytes_;
    int max_blocks_ = 1;
    unsigned long long epoch_ = 0;
    std::vector<DeviceBuffer<unsigned long long>> flags_;
};

}  // namespace

std::unique_ptr<AllreduceVariant> make_p2p_kernel(GpuGroup& group, size_t one_shot_max_bytes) {
    return std::make_unique<P2pKernel>(group, one_shot_max_bytes);
}

}  // namespace fwi
