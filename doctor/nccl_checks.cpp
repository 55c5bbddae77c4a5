// Check 5: NCCL allreduce over every GPU of this process, on the suite's communicators (made non-blocking,
// used blocking: common/nccl_comm.hpp), every wait with the check's deadline: checked, then timed at a few sizes the
// way nccl-tests times (common/allreduce_sweep), and compared with what the links carry (nccl_verdict.hpp); and the
// verified allreduce shared with the MPI check.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>

#include "allreduce_sweep.hpp"
#include "bandwidth.hpp"
#include "cuda_check.hpp"
#include "cuda_timing.hpp"
#include "errors.hpp"
#include "gpu_checks.hpp"
#include "gpu_waits.hpp"
#include "nccl_allreduce.hpp"
#include "nccl_check.hpp"
#include "nccl_comm.hpp"
#include "nccl_log.hpp"
#include "nccl_verdict.hpp"

namespace fwi::doctor {

const char* const kNcclAdvice =
    "a GPU pair with broken P2P hangs NCCL: retry with NCCL_P2P_DISABLE=1 (works then? P2P is the culprit, see checks "
    "2-4), then NCCL_SHM_DISABLE=1; NCCL_DEBUG=INFO shows the transports it picks; check `nvidia-smi` for other "
    "processes on the GPUs";

const char* const kNcclInterfaceAdvice =
    "NCCL found no network interface for its bootstrap (it needs one even on one host): NCCL_SOCKET_IFNAME, where "
    "set, must name an interface of every host (`ip -br addr` lists them; a leading ^ excludes, = matches exactly); "
    "unset it to let NCCL choose";

const char* const kNcclSharedMemoryAdvice =
    "NCCL could not make its buffers in /dev/shm, which is full or too small (Docker gives a container 64 MB): "
    "start the container with --shm-size=8g or --ipc=host, or remove what killed jobs left in /dev/shm (check 6 "
    "shows its size); disabling P2P would only send more through it";

std::string nccl_failure_advice(const std::string& message) {
    if (message.find("no socket interface") != std::string::npos) return kNcclInterfaceAdvice;
    // NCCL's warnings name the segment's path ("Error while creating shared memory segment /dev/shm/nccl-...",
    // "failed to extend /dev/shm/nccl-... to N bytes").
    if (message.find("/dev/shm") != std::string::npos) return kNcclSharedMemoryAdvice;
    return kNcclAdvice;
}

namespace {
// 1..7 from a hash of the index (a multiply, and the high bits folded down, as allreduce_input does), not
// index % 7: a result shifted by a multiple of 7 elements would read right.
int index_factor(size_t index) {
    unsigned long long mixed = static_cast<unsigned long long>(index) * 0x9E3779B97F4A7C15ull;
    mixed ^= mixed >> 29;
    return 1 + int(mixed % 7);
}

constexpr long long kRankValues = 64;  // the ranks' inputs repeat every 64 ranks
}  // namespace

float closed_form_input(int rank, size_t index) { return float((rank % kRankValues + 1) * index_factor(index)); }

float closed_form_sum(int ranks, size_t index) {
    // 1 + 2 + ... + 64 for every whole 64 ranks, then 1 + ... + the ranks left over.
    const long long whole = ranks / kRankValues, left = ranks % kRankValues;
    const long long ranks_sum = whole * kRankValues * (kRankValues + 1) / 2 + left * (left + 1) / 2;
    return float(ranks_sum * index_factor(index));
}

RankBuffers::RankBuffers(int device, int rank, size_t count)
    : device_(device), count_(count), send_(device, count), receive_(device, count) {
    std::vector<float> input(count);
    for (size_t i = 0; i < count; ++i) input[i] = closed_form_input(rank, i);
    CUDA_CHECK(cudaMemcpy(send_.data(), input.data(), count * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemset(receive_.data(), 0xFF, count * sizeof(float)));  // every bit set: a NaN, never a sum
}

void RankBuffers::allreduce(ncclComm_t comm, cudaStream_t stream, size_t count) const {
    CUDA_CHECK(cudaSetDevice(device_));
    NCCL_CHECK(ncclAllReduce(send_.data(), receive_.data(), std::min(count, count_), ncclFloat, ncclSum, comm, stream));
}

void RankBuffers::poison(cudaStream_t stream, size_t count) const {
    CUDA_CHECK(cudaSetDevice(device_));
    CUDA_CHECK(cudaMemsetAsync(receive_.data(), 0xFF, std::min(count, count_) * sizeof(float), stream));
}

long long RankBuffers::count_wrong(int ranks, size_t count) const {
    count = std::min(count, count_);
    std::vector<float> result(count);
    CUDA_CHECK(cudaSetDevice(device_));
    CUDA_CHECK(cudaMemcpy(result.data(), receive_.data(), count * sizeof(float), cudaMemcpyDeviceToHost));
    long long wrong = 0;
    for (size_t i = 0; i < count; ++i) wrong += result[i] != closed_form_sum(ranks, i);  // NaN never equals
    return wrong;
}

namespace {

void add_setting_notes(Finding& finding, const Variables& variables, const GpuSystem& system) {
    for (const auto& note : nccl_setting_notes(variables)) {
        finding.details.push_back("setting: " + note.text());
        // A P2P level below NCCL's default takes P2P away only where some pair's link is beyond it, and
        // NCCL_P2P_DISABLE=1 only where some pair has peer access.
        const bool slows = note.name == "NCCL_P2P_LEVEL"
                               ? p2p_level_limits_pairs(value_of(variables, note.name), system)
                           : note.name == "NCCL_P2P_DISABLE" ? note.slows && some_pair_has_peer_access(system)
                                                             : note.slows;
        if (slows && finding.status == Status::pass) {
            finding.status = Status::warn;
            finding.summary += "; but " + note.setting + " is set";
            finding.next = "unset " + note.name + " unless you are diagnosing: it takes NCCL's fastest path away";
        }
    }
}

// The error's own text up to its generic hint: the finding gives doctor's advice instead.
Finding nccl_failure(const std::string& version, const std::exception& error, const NcclLogCapture& capture) {
    const std::string message = error.what();
    Finding finding;
    finding.id = "nccl";
    finding.status = Status::fail;
    finding.summary = version + ": " + message.substr(0, message.find(" Hint: "));
    finding.next = nccl_failure_advice(message);
    finding.details = failure_lines(capture.read());
    return finding;
}

// Check 5's allreduce, as a variant of the sweep harness (common/allreduce_sweep.hpp), which sets up,
// checks, warms up and times it: one group of ncclAllReduce over every GPU of this process, out of place.
// A batch is timed by CUDA events on every GPU's stream, and the slowest GPU's time counts. Every wait
// polls the communicators and streams against the check's deadline.
class AllGpusAllreduce final : public AllreduceSweepVariant {
public:
    AllGpusAllreduce(const std::vector<ncclComm_t>& comms, size_t max_count, const Deadline& deadline,
                     const Injection& injection)
        : comms_(comms), deadline_(deadline), hang_nccl_(injection.hang_nccl) {
        if (injection.nccl_no_memory)
            throw DeviceMemoryError("GPU 0 has no memory for 2 buffers of " +
                                    std::to_string(max_count * sizeof(float) >> 20) +
                                    " MiB (FWI_DOCTOR_INJECT=nccl-no-memory)");
        for (int rank = 0; rank < int(comms.size()); ++rank) {
            buffers_.emplace_back(rank, rank, max_count);
            streams_.emplace_back(rank);
            starts_.emplace_back(rank, CudaEvent::Timing::on);
            stops_.emplace_back(rank, CudaEvent::Timing::on);
            stream_handles_.push_back(streams_.back().get());
        }
    }

    std::string name() const override { return "nccl"; }
    std::string description() const override { return "ncclAllReduce over every GPU of this process"; }
    void setup(size_t count) override {
        for (size_t rank = 0; rank < buffers_.size(); ++rank) buffers_[rank].poison(streams_[rank].get(), count);
    }
    // With an NCCL before 2.18 the communicators are non-blocking ones, which may still be issuing the group
    // when ncclGroupEnd returns: wait_until_issued.
    void run(size_t count) override {
        count_ = count;
        // FWI_DOCTOR_INJECT=hang-nccl: the call after the first, checked one leaves GPU 0 out, so the other
        // GPUs wait for it until the deadline, as they would for a GPU or rank that hung.
        const bool leave_out_gpu_0 = hang_nccl_ && ++runs_ == 2;
        // A failure aborts the communicators, as a failed wait does: earlier batches may still be queued.
        const ncclResult_t status = nccl_group(comms_, "issuing the " + what(), [&] {
            for (size_t rank = 0; rank < buffers_.size(); ++rank)
                if (!(leave_out_gpu_0 && rank == 0))
                    buffers_[rank].allreduce(comms_[rank], streams_[rank].get(), count);
        });
        wait_until_issued(status, comms_, "the " + what(), deadline_.remaining());
        if (leave_out_gpu_0) wait();
    }
    void wait() override { wait_for_nccl(comms_, stream_handles_, what(), deadline_.remaining()); }
    long long count_wrong(size_t count) override {
        long long wrong = 0;
        for (const RankBuffers& buffers : buffers_) wrong += buffers.count_wrong(int(buffers_.size()), count);
        return wrong;
    }
    void begin_batch() override { record(starts_); }
    double end_batch() override {
        record(stops_);
        wait();  // with the deadline; the events are complete after it
        double slowest = 0.0;
        for (size_t rank = 0; rank < buffers_.size(); ++rank)
            slowest = std::max(slowest, elapsed_seconds(starts_[rank], stops_[rank]));
        return slowest;
    }

private:
    std::string what() const { return "NCCL allreduce of " + std::to_string(count_ * sizeof(float) / kMiB) + " MiB"; }
    void record(const std::vector<CudaEvent>& events) const {
        for (size_t rank = 0; rank < buffers_.size(); ++rank) {
            CUDA_CHECK(cudaSetDevice(int(rank)));
            CUDA_CHECK(cudaEventRecord(events[rank].get(), streams_[rank].get()));
        }
    }

    const std::vector<ncclComm_t>& comms_;
    const Deadline& deadline_;
    bool hang_nccl_;
    int runs_ = 0;
    size_t count_ = 0;  // of the last allreduce started, for the messages
    std::vector<RankBuffers> buffers_;
    std::vector<CudaStream> streams_;
    std::vector<CudaEvent> starts_, stops_;  // with timing
    std::vector<cudaStream_t> stream_handles_;
};

// "1, 32 and 256 MiB"
std::string size_list(const std::vector<SweepRow>& rows) {
    std::string text;
    for (size_t i = 0; i < rows.size(); ++i)
        text += (i == 0 ? "" : i + 1 == rows.size() ? " and " : ", ") + std::to_string(rows[i].bytes / kMiB);
    return text + " MiB";
}

JsonObject rows_json(const std::vector<SweepRow>& rows, int gpus, const AllreduceSweepOptions& timing) {
    std::vector<JsonObject> sizes;
    for (const SweepRow& row : rows)
        sizes.push_back(JsonObject()
                            .add("bytes", row.bytes)
                            .add("calls_per_batch", batch_iterations(row.bytes, timing.iters))
                            .add("time_us", row.seconds * 1e6)
                            .add("algbw_GBps", algorithm_bandwidth(row.bytes, row.seconds) / 1e9)
                            .add("busbw_GBps", bus_bandwidth(row.bytes, row.seconds, gpus) / 1e9)
                            .add("wrong", row.wrong));
    return JsonObject().add("warmup", timing.warmup).add("batches", timing.repeats).add("sizes", sizes);
}

Finding allreduce_over_all_gpus(const GpuSystem& system, const Variables& variables, const NcclOptions& options,
                                const Deadline& deadline) {
    const int n = system.count;
    const NcclLogCapture capture;  // before the first NCCL call of the process (nccl_init_all keeps NVLS off)
    const std::string version = nccl_version_string();
    std::vector<int> devices(n);
    for (int device = 0; device < n; ++device) devices[device] = device;

    std::vector<ncclComm_t> comms;
    try {
        comms = nccl_init_all(devices, deadline.remaining());
    } catch (const EnvironmentError& error) {
        return nccl_failure(version, error, capture);
    }
    const std::vector<size_t> sizes = nccl_check_sizes(options.largest_bytes);
    const AllreduceSweepOptions timing;  // nccl-tests' defaults: 5 warm-up calls, the median of 5 batches of 20
    SweepLayout layout;
    layout.gpus = layout.ranks = n;
    layout.reports = false;
    std::vector<SweepRow> rows;
    std::optional<AllGpusAllreduce> variant;
    try {
        variant.emplace(comms, sizes.back() / sizeof(float), deadline, options.injection);
    } catch (const DeviceMemoryError& error) {  // the buffers of --nccl-mib: the communicators are still up
        for (const ncclComm_t comm : comms) nccl_abort(comm);
        Finding finding;
        finding.id = "nccl";
        finding.status = Status::warn;
        const std::string message = error.what();
        finding.summary = version + ": not measured: " + message.substr(0, message.find(" Hint: "));
        finding.next = "every GPU holds a send and a receive buffer of --nccl-mib (" +
                       std::to_string(options.largest_bytes >> 20) +
                       " MiB): give a smaller one, or end what else uses the GPUs' memory";
        return finding;
    }
    try {
        for (const size_t bytes : sizes) {
            rows.push_back(measure_allreduce_size(*variant, bytes, timing, layout));
            if (rows.back().wrong > 0) break;  // a wrong sum makes its timing meaningless
        }
    } catch (const EnvironmentError& error) {  // nccl_group or wait_for_nccl aborted the communicators
        return nccl_failure(version, error, capture);
    }
    try {
        nccl_destroy_all(comms, deadline.remaining());
    } catch (const EnvironmentError& error) {  // nccl_destroy_all aborted them
        return nccl_failure(version, error, capture);
    }
    const NcclLog log = capture.read();

    Finding finding;
    finding.id = "nccl";
    const std::string what = version + ": allreduce over " + count_of(n, "GPU");
    finding.facts.add("version", version).add("timing", rows_json(rows, n, timing));
    if (rows.back().wrong > 0) {
        finding.status = Status::fail;
        finding.summary = what + ": " + std::to_string(rows.back().wrong) + " of " +
                          std::to_string(rows.back().bytes / sizeof(float) * n) + " result elements wrong at " +
                          std::to_string(rows.back().bytes / kMiB) + " MiB";
        finding.next = kNcclAdvice;
    } else {
        const SweepRow& summary = nccl_summary_row(rows);
        const double busbw = bus_bandwidth(summary.bytes, summary.seconds, n) / 1e9;
        char text[200];
        if (n > 1)
            std::snprintf(text, sizeof text, ": correct at %s; bus bandwidth %.1f GB/s at %zu MiB (%.0f us)",
                          size_list(rows).c_str(), busbw, summary.bytes / kMiB, summary.seconds * 1e6);
        else  // busbw's factor 2(n-1)/n is 0: one GPU's allreduce is a copy, over no link
            std::snprintf(text, sizeof text,
                          ": correct at %s; one GPU, so nothing crosses a link (a copy of %.1f GB/s at %zu MiB, "
                          "%.0f us)",
                          size_list(rows).c_str(), algorithm_bandwidth(summary.bytes, summary.seconds) / 1e9,
                          summary.bytes / kMiB, summary.seconds * 1e6);
        finding.summary = what + text;
        finding.facts.add("bytes", summary.bytes).add("time_us", summary.seconds * 1e6).add("busbw_GBps", busbw);
        finding.details = nccl_timing_lines(rows, n, timing);
        // (Where check 2 did not say, check 4 did not run either, and that is what the line says.)
        const bool every_pair_has_peer_access = system.every_pair_has_peer_access();
        finding.details.push_back(
            link_comparison_line(rows.back(), n, system.p2p_one_way_GBps, every_pair_has_peer_access));

        // Both signs are read from what NCCL did, so they hold whether the setting behind them is in doctor's
        // environment or in an NCCL config file.
        PeerLinkFindings around;
        if (system.can_access.size() == size_t(n) * n)  // check 2 knows which pairs have peer access
            around = transports_around_peer_access(
                log, n, [&](int i, int j) { return system.peer(i, j); }, variables, "GPU",
                [](int, int) { return true; });  // one process: one host
        for (const auto& note : around.notes) finding.details.push_back("note: " + note);
        std::vector<std::string> problems = around.problems;
        const bool around_links = !problems.empty();
        if (const std::string low =
                low_bus_bandwidth(rows.back(), n, system.p2p_one_way_GBps, every_pair_has_peer_access);
            !low.empty())
            problems.push_back(low);
        if (!problems.empty()) {
            finding.status = Status::warn;
            finding.summary +=
                "; but " + problems.front() +
                (problems.size() > 1 ? " (and " + std::to_string(problems.size() - 1) + " more below)" : "");
            for (const auto& problem : problems) finding.details.push_back("WARN: " + problem);
            finding.next = around_links
                               ? around.advice()
                               : "NCCL's connections are P2P yet slow: look for other processes on the GPUs "
                                 "(check 1 lists them), NCCL_ALGO / NCCL_PROTO settings and check 4's matrices";
        }
        finding.facts.add("p2p_one_way_GBps", system.p2p_one_way_GBps).add("problems", problems);
    }
    for (const auto& line : transport_lines(log, n, capture.capturing())) finding.details.push_back(line);
    for (const auto& line : warning_lines(log)) finding.details.push_back(line);
    finding.facts.add("transports", transport_json(log, n));
    return finding;
}

}  // namespace

Finding check_nccl(const GpuSystem& system, const Variables& variables, const NcclOptions& options,
                   const Deadline& deadline) {
    Finding finding = allreduce_over_all_gpus(system, variables, options, deadline);
    add_setting_notes(finding, variables, system);
    return finding;
}

}  // namespace fwi::doctor
