// GpuGroup: the GPUs one process drives for the allreduce lesson, with what every variant shares:
// one stream per GPU, peer access between every pair that supports it (or none, to see what a machine
// without P2P gets), the send/receive buffers with their input data, poisoning and checking, and waits
// that give up after --timeout seconds.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "gpu_resources.hpp"

namespace fwi {

// In this lesson a *rank* is a GPU's place in the allreduce (0 .. size()-1, GPU r of the group), as NCCL
// names the members of a communicator; from 03 on, each GPU has a process of its own and the rank is the
// MPI rank's.
constexpr int kMaxRanks = 8;  // kernel arguments hold one pointer per GPU

// Waits for `event` (wait_for_event_within) until `timeout_s` after `start` (steady_seconds: several waits
// can share one limit); then abandons the GPUs' work (the GPUs may be hung: from then on destructors leave
// device memory, streams and communicators to the process's end, as freeing would wait on the hung work
// forever; abandon_gpu_work) and throws EnvironmentError naming `what`.
void wait_for_event(cudaEvent_t event, double start, double timeout_s, const std::string& what);

// Whether a GpuGroup enables peer access between its GPUs. Left off, a copy between two GPUs
// (cudaMemcpyPeerAsync) is staged through host memory by the driver, and no kernel can read another GPU's
// memory: what a machine without P2P gets (PCIe across CPU sockets, many VMs and consumer cards).
enum class PeerAccess { enable, leave_off };

class GpuGroup {
public:
    // Uses GPUs 0..gpus-1 (0 = every visible GPU, up to kMaxRanks). Throws EnvironmentError when there are
    // too few.
    GpuGroup(int gpus, double timeout_s, PeerAccess peer_access);
    GpuGroup(const GpuGroup&) = delete;
    GpuGroup& operator=(const GpuGroup&) = delete;

    int size() const { return size_; }
    std::string device_name(int rank) const;
    int multiprocessors(int rank) const { return multiprocessors_[rank]; }
    double timeout_s() const { return timeout_s_; }

    bool can_access_peer(int rank, int peer) const { return peer_access_[rank * size_ + peer]; }
    bool peer_access_left_off() const { return peer_access_left_off_; }
    std::vector<std::pair<int, int>> pairs_without_peer_access() const;

    // The stream of each GPU: a variant's allreduce starts and ends on it, like NCCL's stream argument.
    cudaStream_t stream(int rank) const { return streams_[rank].get(); }

    // Allocates send and receive buffers of `count` floats on every GPU.
    void reserve(size_t count);
    size_t capacity() const { return capacity_; }
    float* send(int rank) const { return send_[rank].data(); }
    float* recv(int rank) const { return recv_[rank].data(); }

    void fill_inputs(size_t count);
    // Fills the receive buffers with NaN, so elements a variant forgets to write count as wrong.
    void poison_outputs(size_t count);
    // Elements of the receive buffers (all GPUs together) that differ from the exact sum.
    long long count_wrong(size_t count);

    // Makes every GPU's stream wait for GPU 0's stream, and GPU 0's stream wait for every other
    // stream: the brackets around a timed batch, so one pair of events on GPU 0 times all GPUs.
    void fork_from_first();
    void join_into_first();

    // Waits (with the timeout) until every stream is idle, then reports any device-side timeout.
    void synchronize(const std::string& what);

    // Host-mapped word where kernels that wait on other GPUs report that they gave up:
    // 0 = fine, else 1 + waiting_rank * kMaxRanks + awaited_rank.
    volatile int* timeout_report() const { return timeout_report_.data(); }

private:
    int size_ = 0;
    double timeout_s_;
    std::vector<int> multiprocessors_;
    std::vector<char> peer_access_;
    bool peer_access_left_off_ = false;
    std::vector<CudaStream> streams_;
    std::vector<CudaEvent> markers_;  // fork/join/sync points, one per GPU
    std::vector<DeviceBuffer<float>> send_, recv_;
    std::vector<DeviceBuffer<unsigned long long>> wrong_counters_;
    size_t capacity_ = 0;
    PinnedBuffer<volatile int> timeout_report_;
};

}  // namespace fwi
