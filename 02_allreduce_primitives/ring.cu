// ring: reduce-scatter then all-gather around the ring 0 -> 1 -> ... -> n-1 -> 0, built from peer
// copies (copy engines) and reduction kernels. Each rank pulls from its predecessor: in the
// reduce-scatter into a scratch buffer, then adds its own input into its result; in the all-gather
// straight into its result. Every link carries 2(n-1)/n of the buffer, the optimum. Without peer access
// the ring still runs: the driver stages each copy through host memory.
//
// Each segment is cut into chunks that travel the ring independently on several streams, so one
// chunk's reduction overlaps the next chunk's copy. Events carry the dependencies: a rank's copy of a
// chunk at step k waits for its predecessor's step k-1 on that chunk; a chunk's copy and reduction on
// one rank share a stream, so the scratch area is free again before the next copy lands in it.
#include <array>

#include "allreduce_variant.hpp"
#include "cuda_check.hpp"
#include "errors.hpp"
#include "ring_schedule.hpp"
#include "sum_kernel.cuh"

namespace fwi {

namespace {

constexpr int kPipelineStreams = 4;
constexpr size_t kMinChunkElements = 64 * 1024;  // 256 KiB: smaller copies are dominated by their overhead

class Ring final : public AllreduceVariant {
public:
    Ring(GpuGroup& group, int chunks_per_segment) : AllreduceVariant(group), max_chunks_(chunks_per_segment) {
        if (!unavailable_reason().empty()) return;
        const int n = group.size();
        const size_t segment = split_evenly(group.capacity(), n, 0, RingPlan::kGranule).size();
        for (int rank = 0; rank < n; ++rank) ranks_.emplace_back(rank, segment, max_chunks_);
    }

    std::string name() const override { return "ring"; }
    std::string description() const override {
        return "reduce-scatter + all-gather around a ring: peer copies and reduction kernels, chunks pipelined over "
               "streams" +
               std::string(group_.pairs_without_peer_access().empty()
                               ? ""
                               : "; without peer access, copies staged through host memory");
    }
    std::string unavailable_reason() const override { return group_.size() < 2 ? "needs 2 or more GPUs" : ""; }

    void run(size_t count) override {
        const RingPlan plan(count, group_.size(), max_chunks_, kMinChunkElements);
        start();
        for (int step = 0; step < ring_steps(plan.ranks()); ++step)
            for (int chunk = 0; chunk < plan.chunks_per_segment(); ++chunk)
                for (int rank = 0; rank < plan.ranks(); ++rank) receive_chunk(plan, rank, step, chunk);
        finish();
    }

private:
    struct PerRank {
        PerRank(int rank, size_t segment, int chunks)
            : scratch(rank, segment), started(rank), finished(rank), chunk_done(chunks) {
            for (int s = 0; s < kPipelineStreams; ++s) {
                streams.emplace_back(rank);
                stream_done.emplace_back(rank);
            }
            for (auto& by_parity : chunk_done)
                for (CudaEvent& event : by_parity) event = CudaEvent(rank);
        }
        DeviceBuffer<float> scratch;      // one segment: what the predecessor sent in the reduce-scatter
        std::vector<CudaStream> streams;  // kPipelineStreams of them
        std::vector<CudaEvent> stream_done;
        CudaEvent started;   // on the group stream: this rank's input is ready
        CudaEvent finished;  // on the group stream: this rank's copies and reductions are done
        // chunk_done[c][k % 2]: this rank finished chunk c of step k. Two per chunk, because a rank's
        // step k+1 record must not replace the step k record its successor has not waited on yet.
        std::vector<std::array<CudaEvent, 2>> chunk_done;
    };

    // The pipeline streams wait for the group stream (inputs ready, previous allreduce finished).
    void start() {
        for (int rank = 0; rank < group_.size(); ++rank) {
            CUDA_CHECK(cudaSetDevice(rank));
            PerRank& mine = ranks_[rank];
            CUDA_CHECK(cudaEventRecord(mine.started.get(), group_.stream(rank)));
            for (const CudaStream& stream : mine.streams)
                CUDA_CHECK(cudaStreamWaitEvent(stream.get(), mine.started.get(), 0));
        }
    }

    void receive_chunk(const RingPlan& plan, int rank, int step, int chunk) {
        const int n = plan.ranks(), sender = ring_previous(n, rank);
        const RingStep what = ring_step(n, rank, step);
        const ElementRange range = plan.chunk(what.segment, chunk);
        if (range.empty()) return;  // then the sender skipped it at step-1 too
        PerRank& mine = ranks_[rank];
        const PerRank& theirs = ranks_[sender];
        cudaStream_t stream = mine.streams[chunk % kPipelineStreams].get();
        CUDA_CHECK(cudaSetDevice(rank));
        CUDA_CHECK(cudaStreamWaitEvent(
            stream, step == 0 ? theirs.started.get() : theirs.chunk_done[chunk][(step - 1) % 2].get(), 0));

        const float* source = (what.from_send_buffer ? group_.send(sender) : group_.recv(sender)) + range.begin;
        const size_t bytes = range.size() * sizeof(float);
        if (what.phase == RingPhase::ReduceScatter) {
            float* incoming = mine.scratch.data() + (range.begin - plan.segment(what.segment).begin);
            CUDA_CHECK(cudaMemcpyPeerAsync(incoming, rank, source, sender, bytes, stream));
            SumOperands sum{};
            sum.inputs[0] = group_.send(rank) + range.begin;
            sum.inputs[1] = incoming;
            sum.input_count = 2;
            sum.outputs[0] = group_.recv(rank) + range.begin;
            sum.output_count = 1;
            launch_sum(sum, range.size(), group_.multiprocessors(rank), stream);
        } else {
            CUDA_CHECK(cudaMemcpyPeerAsync(group_.recv(rank) + range.begin, rank, source, sender, bytes, stream));
        }
        CUDA_CHECK(cudaEventRecord(mine.chunk_done[chunk][step % 2].get(), stream));
    }

    // The group stream of rank r ends after r's own work and after its successor's last copy out of
    // r's buffers, so r's buffers are free once its stream passes this point.
    void finish() {
        const int n = group_.size();
        for (int rank = 0; rank < n; ++rank) {
            CUDA_CHECK(cudaSetDevice(rank));
            PerRank& mine = ranks_[rank];
            for (int s = 0; s < kPipelineStreams; ++s) {
                CUDA_CHECK(cudaEventRecord(mine.stream_done[s].get(), mine.streams[s].get()));
                CUDA_CHECK(cudaStreamWaitEvent(group_.stream(rank), mine.stream_done[s].get(), 0));
            }
            CUDA_CHECK(cudaEventRecord(mine.finished.get(), group_.stream(rank)));
        }
        for (int rank = 0; rank < n; ++rank) {
            CUDA_CHECK(cudaSetDevice(rank));
            CUDA_CHECK(cudaStreamWaitEvent(group_.stream(rank), ranks_[(rank + 1) % n].finished.get(), 0));
        }
    }

    int max_chunks_;
    std::vector<PerRank> ranks_;
};

}  // namespace

std::unique_ptr<AllreduceVariant> make_ring(GpuGroup& group, int chunks_per_segment) {
    return std::make_unique<Ring>(group, chunks_per_segment);
}

}  // namespace fwi
