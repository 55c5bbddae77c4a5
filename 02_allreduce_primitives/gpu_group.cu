#include "gpu_group.hpp"

#include <algorithm>
#include <cstdio>

#include "allreduce_sweep.hpp"
#include "cuda_check.hpp"
#include "device.hpp"
#include "errors.hpp"
#include "polling.hpp"

namespace fwi {

namespace {

constexpr int kThreads = 256;

unsigned blocks_for(size_t count) { return grid_stride_blocks(count, kThreads, 4096); }

__global__ void fill_inputs_kernel(float* data, size_t count, int rank) {
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x)
        data[i] = allreduce_input(rank, i);
}

__global__ void count_wrong_kernel(const float* data, size_t count, int ranks, unsigned long long* wrong) {
    unsigned long long mine = 0;
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x)
        mine += data[i] != allreduce_expected_sum(ranks, i);  // NaN poison never compares equal
    if (mine) atomicAdd(wrong, mine);
}

}  // namespace

void wait_for_event(cudaEvent_t event, double start, double timeout_s, const std::string& what) {
    if (wait_for_event_within(event, std::max(0.0, timeout_s - (steady_seconds() - start)))) return;
    abandon_gpu_work();
    throw EnvironmentError(
        what + " did not finish within " + format_number(timeout_s) +
        " s (--timeout); a GPU or a peer link may be hung: check nvidia-smi and the peer access report above");
}

GpuGroup::GpuGroup(int gpus, double timeout_s, PeerAccess peer_access)
    : timeout_s_(timeout_s), peer_access_left_off_(peer_access == PeerAccess::leave_off) {
    require_gpus(1);
    const int visible = visible_gpu_count();
    size_ = gpus == 0 ? std::min(visible, kMaxRanks) : gpus;
    if (size_ > visible)
        throw EnvironmentError("--gpus " + std::to_string(gpus) + " asks for more GPUs than the " +
                               std::to_string(visible) + " visible (check CUDA_VISIBLE_DEVICES)");
    warn_of_other_processes(0, size_);
    peer_access_.assign(size_ * size_, 0);
    for (int rank = 0; rank < size_; ++rank) {
        CUDA_CHECK(cudaSetDevice(rank));
        int sms = 0;
        CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, rank));
        multiprocessors_.push_back(sms);
        streams_.emplace_back(rank);
        markers_.emplace_back(rank);
        wrong_counters_.emplace_back(rank, 1);
        for (int peer = 0; peer < size_; ++peer) {
            if (peer == rank) continue;
            int possible = 0;
            CUDA_CHECK(cudaDeviceCanAccessPeer(&possible, rank, peer));
            if (!possible) continue;
            if (peer_access == PeerAccess::leave_off) {
                // Peer access belongs to the process: an earlier group (or NCCL) may have enabled it.
                const cudaError_t status = cudaDeviceDisablePeerAccess(peer);
                if (status != cudaSuccess && status != cudaErrorPeerAccessNotEnabled) CUDA_CHECK(status);
                cudaGetLastError();  // clear a "not enabled"
                continue;
            }
            const cudaError_t status = cudaDeviceEnablePeerAccess(peer, 0);
            cudaGetLastError();  // clear a sticky "already enabled", or the refusal below
            // "Possible" yet refused: an IOMMU or a hypervisor in the way, or more than the 8 peers a GPU may
            // map. The pair is then one without peer access, as the variants already handle; any other error
            // ends the program, as before.
            const bool refused = status == cudaErrorPeerAccessUnsupported || status == cudaErrorTooManyPeers ||
                                 status == cudaErrorNotSupported;
            if (refused) {
                print_warning("GPU " + std::to_string(rank) + " may access GPU " + std::to_string(peer) +
                              " as a peer, but enabling it failed (" + cudaGetErrorString(status) +
                              "): that pair is treated as one without peer access (doctor's checks 2 and 3 say why)");
                continue;
            }
            if (status != cudaSuccess && status != cudaErrorPeerAccessAlreadyEnabled) CUDA_CHECK(status);
            peer_access_[rank * size_ + peer] = 1;
        }
    }
    timeout_report_ = PinnedBuffer<volatile int>(1, cudaHostAllocMapped | cudaHostAllocPortable);
    *timeout_report() = 0;
}

std::string GpuGroup::device_name(int rank) const {
    cudaDeviceProp properties{};
    CUDA_CHECK(cudaGetDeviceProperties(&properties, rank));
    return properties.name;
}

std::vector<std::pair<int, int>> GpuGroup::pairs_without_peer_access() const {
    std::vector<std::pair<int, int>> pairs;
    for (int rank = 0; rank < size_; ++rank)
        for (int peer = 0; peer < size_; ++peer)
            if (peer != rank && !can_access_peer(rank, peer)) pairs.emplace_back(rank, peer);
    return pairs;
}

void GpuGroup::reserve(size_t count) {
    send_.clear();
    recv_.clear();
    for (int rank = 0; rank < size_; ++rank) {
        send_.emplace_back(rank, count);
        recv_.emplace_back(rank, count);
    }
    capacity_ = count;
}

void GpuGroup::fill_inputs(size_t count) {
    for (int rank = 0; rank < size_; ++rank) {
        CUDA_CHECK(cudaSetDevice(rank));
        fill_inputs_kernel<<<blocks_for(count), kThreads, 0, streams_[rank].get()>>>(send(rank), count, rank);
        CUDA_CHECK_LAUNCH();
    }
}

void GpuGroup::poison_outputs(size_t count) {
    for (int rank = 0; rank < size_; ++rank) {
        CUDA_CHECK(cudaSetDevice(rank));
        CUDA_CHECK(cudaMemsetAsync(recv(rank), 0xFF, count * sizeof(float), streams_[rank].get()));  // all ones: NaN
    }
}

long long GpuGroup::count_wrong(size_t count) {
    for (int rank = 0; rank < size_; ++rank) {
        CUDA_CHECK(cudaSetDevice(rank));
        unsigned long long* counter = wrong_counters_[rank].data();
        CUDA_CHECK(cudaMemsetAsync(counter, 0, sizeof *counter, streams_[rank].get()));
        count_wrong_kernel<<<blocks_for(count), kThreads, 0, streams_[rank].get()>>>(recv(rank), count, size_, counter);
        CUDA_CHECK_LAUNCH();
    }
    synchronize("checking the result");
    long long wrong = 0;
    for (int rank = 0; rank < size_; ++rank) {
        unsigned long long counted = 0;
        CUDA_CHECK(cudaMemcpy(&counted, wrong_counters_[rank].data(), sizeof counted, cudaMemcpyDeviceToHost));
        wrong += static_cast<long long>(counted);
    }
    return wrong;
}

void GpuGroup::fork_from_first() {
    CUDA_CHECK(cudaSetDevice(0));
    CUDA_CHECK(cudaEventRecord(markers_[0].get(), streams_[0].get()));
    for (int rank = 1; rank < size_; ++rank) {
        CUDA_CHECK(cudaSetDevice(rank));
        CUDA_CHECK(cudaStreamWaitEvent(streams_[rank].get(), markers_[0].get(), 0));
    }
}

void GpuGroup::join_into_first() {
    for (int rank = 1; rank < size_; ++rank) {
        CUDA_CHECK(cudaSetDevice(rank));
        CUDA_CHECK(cudaEventRecord(markers_[rank].get(), streams_[rank].get()));
    }
    CUDA_CHECK(cudaSetDevice(0));
    for (int rank = 1; rank < size_; ++rank)
        CUDA_CHECK(cudaStreamWaitEvent(streams_[0].get(), markers_[rank].get(), 0));
}

void GpuGroup::synchronize(const std::string& what) {
    for (int rank = 0; rank < size_; ++rank) {
        CUDA_CHECK(cudaSetDevice(rank));
        CUDA_CHECK(cudaEventRecord(markers_[rank].get(), streams_[rank].get()));
    }
    const double start = steady_seconds();  // one limit for the whole group, not one per GPU in turn
    for (int rank = 0; rank < size_; ++rank)
        wait_for_event(markers_[rank].get(), start, timeout_s_, what + " on GPU " + std::to_string(rank));
    if (const int report = *timeout_report()) {
        *timeout_report() = 0;  // the kernels have ended: the next run starts without it
        const int waiting = (report - 1) / kMaxRanks, awaited = (report - 1) % kMaxRanks;
        throw EnvironmentError(what + ": GPU " + std::to_string(waiting) + " gave up waiting for a signal from GPU " +
                               std::to_string(awaited) + " after " + format_number(timeout_s_ / 2) +
                               " s (device-side wait); the peer link or that GPU may be hung");
    }
}

}  // namespace fwi
