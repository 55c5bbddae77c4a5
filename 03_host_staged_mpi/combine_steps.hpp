// The host-side logic of every combine variant, written against StagingCopies (the copies between the
// gradient's memory and a host buffer) so that it runs on the GPU (device_combine.cu) and, with a plain
// host buffer standing in for device memory, in the CPU tests under mpirun. Every variant SUMS the
// gradient over the ranks in place: the sum of the ranks' gradients is the gradient over all shots.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <string>
#include <vector>

namespace fwi {

// ---- The sum itself: a buffer in host memory (or, for cuda_aware, device memory) summed over the ranks
// in place, a chunk at a time (chunks let the pipelined variant overlap the copies of one chunk with the
// sum of another) ----

struct Chunk {
    size_t offset = 0, count = 0;
};

// [0, total) in chunks of `chunk_elements` (the last one shorter); one chunk when chunk_elements is 0.
std::vector<Chunk> chunk_ranges(size_t total, size_t chunk_elements);

// Sums `chunk` of `values` over the ranks of `comm` in place (MPI_Allreduce, MPI_IN_PLACE). Every rank
// gets bit-identical results.
void sum_chunk_over_ranks(float* values, const Chunk& chunk, MPI_Comm comm);

// ---- The variants, around it ----

// Copies between the gradient's memory ("device") and a host staging buffer of the same size, in two
// lanes that run asynchronously to the host thread and each keep their order (on the GPU: two CUDA
// streams, so the two copy engines work at the same time). Copies are numbered 0, 1, ... per combine.
class StagingCopies {
public:
    virtual ~StagingCopies() = default;
    virtual float* host() = 0;
    // A new combine of `chunks` chunks: numbering starts again at 0.
    virtual void begin(size_t chunks) = 0;
    virtual void start_to_host(size_t index, const Chunk& chunk) = 0;
    virtual bool arrived_on_host(size_t index) = 0;  // without waiting
    virtual void wait_on_host(size_t index) = 0;
    virtual void start_to_device(size_t index, const Chunk& chunk) = 0;
    virtual void wait_on_device() = 0;  // for every to-device copy of this combine
    // Time the lanes were busy with this combine's copies; valid after wait_on_device.
    virtual double to_host_busy_seconds() = 0;
    virtual double to_device_busy_seconds() = 0;
};

// Where one combine's time went. Sequential variants: the phases add up to the wall time. Pipelined:
// the phases overlap, so each is its busy time (copies: the lanes' busy time from CUDA events; MPI:
// host time during which at least one MPI operation was in progress) and their sum exceeds the wall.
struct CombineTimes {
    double wall = 0.0, to_host = 0.0, mpi = 0.0, to_device = 0.0;
};

// pageable and pinned (the staging buffer decides which): the whole buffer to the host, one
// MPI_Allreduce, the whole buffer back.
CombineTimes combine_whole(StagingCopies& copies, size_t count, MPI_Comm comm);

struct PipelineSettings {
    size_t chunk_elements = 0;  // 0: one chunk
    int in_flight = 1;          // 1: one blocking MPI_Allreduce per chunk; N > 1: up to N MPI_Iallreduce at once
};

// pipelined: the to-host copies are queued a few chunks ahead (the lane runs them back to back); as each
// chunk arrives it is summed by MPI, and its to-device copy starts as soon as its sum is done. So the
// to-host copy of chunk k+1, MPI on chunk k and the to-device copy of chunk k-1 run at the same time.
CombineTimes combine_pipelined(StagingCopies& copies, size_t count, const PipelineSettings& settings, MPI_Comm comm);

// cuda_aware: the buffer itself (device memory, for a CUDA-aware MPI) to one MPI_Allreduce.
CombineTimes combine_cuda_aware(float* values, size_t count, MPI_Comm comm);

// Empty when every rank's MPI can take device pointers: it says so at compile time (mpi-ext.h,
// MPIX_CUDA_AWARE_SUPPORT) and at run time (MPIX_Query_cuda_support()). Otherwise the reason. Collective over
// MPI_COMM_WORLD, under a WaitTimeout of timeout_s: the run-time answer is each process's own, and ranks that
// answered differently would run different variants and wait for each other's collectives.
std::string cuda_aware_unavailable_reason(double timeout_s);

}  // namespace fwi
