// The verified allreduce of doctor's NCCL checks (5: one process, all GPUs; 7: one rank per GPU under
// MPI): every rank's input is small integers, so the float sum is exact and any wrong element counts.
// Implemented in nccl_checks.cpp, beside check 5.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <string>
#include <vector>

#include "gpu_resources.hpp"

namespace fwi::doctor {

// Not the sweep's inputs (common/allreduce_sweep.hpp): these have a closed-form sum, so checking a
// 256 MiB result on every GPU costs one pass over it, whatever the number of GPUs. (rank % 64 + 1) times a
// factor 1..7 hashed from the index: a result shifted by any offset reads wrong at most elements, and the
// sum stays an integer a float holds exactly (below 2^24) up to 73,000 ranks, where (rank + 1) would stop
// at 2,189.
float closed_form_input(int rank, size_t index);
float closed_form_sum(int ranks, size_t index);

// One rank's buffers, for allreduces of up to `count` floats: the send buffer holds its input, the
// receive buffer NaN until an allreduce writes it. The calls below work on the first `count` floats
// (all of them when not given).
class RankBuffers {
public:
    RankBuffers(int device, int rank, size_t count);
    // Enqueues the allreduce on `stream` (a non-blocking communicator, with an NCCL before 2.18, may return
    // ncclInProgress).
    void allreduce(ncclComm_t comm, cudaStream_t stream) const { allreduce(comm, stream, count_); }
    void allreduce(ncclComm_t comm, cudaStream_t stream, size_t count) const;
    // Enqueues setting the receive buffer to NaN on `stream`, so that elements an allreduce leaves unwritten
    // count as wrong.
    void poison(cudaStream_t stream, size_t count) const;
    // Elements of the result that differ from the exact sum over `ranks`; call once the stream is idle.
    long long count_wrong(int ranks) const { return count_wrong(ranks, count_); }
    long long count_wrong(int ranks, size_t count) const;

private:
    int device_;
    size_t count_;
    DeviceBuffer<float> send_, receive_;
};

// What to try when NCCL fails or hangs.
extern const char* const kNcclAdvice;
// What to try when NCCL's bootstrap finds no network interface to use (NCCL's "no socket interface found"),
// which no P2P setting changes.
extern const char* const kNcclInterfaceAdvice;
// What to try when NCCL cannot make its buffers in /dev/shm (a container's small default), where P2P
// settings would only make it worse.
extern const char* const kNcclSharedMemoryAdvice;
// The advice for a failure that NCCL's message `message` explains: kNcclInterfaceAdvice where it names the
// missing interface, kNcclSharedMemoryAdvice where it names /dev/shm, else kNcclAdvice.
std::string nccl_failure_advice(const std::string& message);

}  // namespace fwi::doctor
