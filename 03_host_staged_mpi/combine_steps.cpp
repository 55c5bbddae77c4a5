#include "combine_steps.hpp"

#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>  // Open MPI: MPIX_CUDA_AWARE_SUPPORT, MPIX_Query_cuda_support
#endif

#include <algorithm>
#include <climits>
#include <deque>
#include <vector>

#include "errors.hpp"
#include "mpi_check.hpp"
#include "rank_collectives.hpp"
#include "timing.hpp"

namespace fwi {

std::vector<Chunk> chunk_ranges(size_t total, size_t chunk_elements) {
    if (chunk_elements == 0) chunk_elements = std::max<size_t>(total, 1);
    std::vector<Chunk> chunks;
    for (size_t offset = 0; offset < total; offset += chunk_elements)
        chunks.push_back({offset, std::min(chunk_elements, total - offset)});
    return chunks;
}

void sum_chunk_over_ranks(float* values, const Chunk& chunk, MPI_Comm comm) {
    // MPI counts are int: split a chunk larger than INT_MAX elements into several calls.
    for (size_t done = 0; done < chunk.count;) {
        const int count = static_cast<int>(std::min<size_t>(chunk.count - done, INT_MAX));
        MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, values + chunk.offset + done, count, MPI_FLOAT, MPI_SUM, comm));
        done += count;
    }
}

namespace {

// Host time during which at least one of possibly several overlapping operations is in progress.
class BusyClock {
public:
    void started() {
        if (active_++ == 0) since_.restart();
    }
    void finished() {
        if (--active_ == 0) seconds_ += since_.seconds();
    }
    double seconds() const { return seconds_; }

private:
    int active_ = 0;
    double seconds_ = 0.0;
    HostTimer since_;
};

// The to-host copies are queued this many chunks ahead of the sums: enough to keep the copy engine busy
// while MPI works, few enough that queueing thousands of small chunks does not delay the first sum.
constexpr size_t kToHostLookahead = 8;

struct ChunkInFlight {
    size_t index;
    MPI_Request request;  // MPI_REQUEST_NULL when the sum is already done
};

// Sums one chunk over the ranks: at once with MPI_Allreduce (in_flight 1, the tuned blocking
// collective), or started with MPI_Iallreduce and finished by MPI_Wait/MPI_Test.
MPI_Request start_chunk_sum(float* host, const Chunk& chunk, int in_flight, MPI_Comm comm) {
    if (in_flight == 1) {
        sum_chunk_over_ranks(host, chunk, comm);
        return MPI_REQUEST_NULL;
    }
    if (chunk.count > size_t(INT_MAX)) throw UsageError("--chunk-kb: a chunk must hold at most INT_MAX floats");
    MPI_Request request = MPI_REQUEST_NULL;
    MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, host + chunk.offset, int(chunk.count), MPI_FLOAT, MPI_SUM, comm, &request));
    return request;
}

}  // namespace

CombineTimes combine_whole(StagingCopies& copies, size_t count, MPI_Comm comm) {
    const Chunk whole{0, count};
    CombineTimes times;
    LapTimer clock;
    copies.begin(1);
    copies.start_to_host(0, whole);
    copies.wait_on_host(0);
    times.to_host = clock.lap();
    sum_chunk_over_ranks(copies.host(), whole, comm);
    times.mpi = clock.lap();
    copies.start_to_device(0, whole);
    copies.wait_on_device();
    times.to_device = clock.lap();
    times.wall = times.to_host + times.mpi + times.to_device;
    return times;
}

CombineTimes combine_pipelined(StagingCopies& copies, size_t count, const PipelineSettings& settings, MPI_Comm comm) {
    HostTimer wall;
    const std::vector<Chunk> chunks = chunk_ranges(count, settings.chunk_elements);
    copies.begin(chunks.size());
    size_t queued = 0;  // chunks whose to-host copy is queued
    const auto queue_to_host_before = [&](size_t end) {
        for (; queued < std::min(end, chunks.size()); ++queued) copies.start_to_host(queued, chunks[queued]);
    };
    queue_to_host_before(kToHostLookahead);

    BusyClock mpi;
    std::deque<ChunkInFlight> in_flight;
    const auto finish_oldest = [&] {
        MPI_CHECK(MPI_Wait(&in_flight.front().request, MPI_STATUS_IGNORE));
        mpi.finished();
        const size_t k = in_flight.front().index;
        copies.start_to_device(k, chunks[k]);
        in_flight.pop_front();
    };
    // Open MPI advances non-blocking collectives only inside MPI calls, so while a chunk is still on
    // its way to the host, MPI_Test keeps the sums in flight moving (and finishes the oldest when done).
    const auto progress = [&] {
        int done = 0;
        MPI_CHECK(MPI_Test(&in_flight.front().request, &done, MPI_STATUS_IGNORE));
        if (done) finish_oldest();
    };

    for (size_t k = 0; k < chunks.size(); ++k) {
        if (in_flight.size() == size_t(settings.in_flight)) finish_oldest();
        while (!copies.arrived_on_host(k)) {
            if (in_flight.empty()) {
                copies.wait_on_host(k);
                break;
            }
            progress();
        }
        queue_to_host_before(k + 1 + kToHostLookahead);  // chunk k+1 and on travel while MPI sums chunk k
        mpi.started();
        in_flight.push_back({k, start_chunk_sum(copies.host(), chunks[k], settings.in_flight, comm)});
    }
    while (!in_flight.empty()) finish_oldest();
    copies.wait_on_device();

    CombineTimes times;
    times.wall = wall.seconds();
    times.to_host = copies.to_host_busy_seconds();
    times.mpi = mpi.seconds();
    times.to_device = copies.to_device_busy_seconds();
    return times;
}

CombineTimes combine_cuda_aware(float* values, size_t count, MPI_Comm comm) {
    HostTimer wall;
    sum_chunk_over_ranks(values, Chunk{0, count}, comm);
    CombineTimes times;
    times.wall = times.mpi = wall.seconds();
    return times;
}

namespace {
std::string cuda_aware_unavailable_here() {
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
    if (MPIX_Query_cuda_support() == 1) return "";
    return "this MPI was built with CUDA support, but MPIX_Query_cuda_support() reports it off at run time (Open MPI: "
           "check the smcuda/UCX components, e.g. ompi_info | grep -i cuda)";
#elif defined(MPIX_CUDA_AWARE_SUPPORT)
    return "this MPI was built without CUDA support (mpi-ext.h defines MPIX_CUDA_AWARE_SUPPORT 0), so it cannot read "
           "device pointers; the host-staged variants are the portable way";
#else
    return "this MPI does not say whether it is CUDA-aware (no MPIX_CUDA_AWARE_SUPPORT in mpi-ext.h), so device "
           "pointers are not passed to it";
#endif
}
}  // namespace

std::string cuda_aware_unavailable_reason(double timeout_s) {
    const std::string here = cuda_aware_unavailable_here();
    const double unavailable_somewhere =
        reduce_over_ranks(here.empty() ? 0.0 : 1.0, MPI_MAX, "the other ranks' answer on CUDA-aware MPI", timeout_s);
    if (unavailable_somewhere == 0.0) return "";
    return here.empty() ? "another rank's MPI reports no CUDA support at run time (MPIX_Query_cuda_support()), so no "
                          "rank passes device pointers to MPI"
                        : here;
}

}  // namespace fwi
