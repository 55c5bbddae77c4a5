// Check 5: NCCL allreduce over every GPU of this process, on non-blocking communicators, every wait with
// the check's deadline; and the verified allreduce shared with the MPI check.
#include <cmath>
#include <cstdlib>

#include "bandwidth.hpp"
#include "cuda_check.hpp"
#include "errors.hpp"
#include "gpu_checks.hpp"
#include "nccl_allreduce.hpp"
#include "nccl_check.hpp"
#include "nccl_comm.hpp"
#include "nccl_log.hpp"
#include "timing.hpp"

namespace fwi::doctor {

const char* const kNcclAdvice =
    "a GPU pair with broken P2P hangs NCCL: retry with NCCL_P2P_DISABLE=1 (works then? P2P is the culprit, see "
    "checks 2-4), then NCCL_SHM_DISABLE=1; NCCL_DEBUG=INFO shows the transports it picks; check `nvidia-smi` for "
    "other processes on the GPUs";

float allreduce_input(int rank, size_t index) { return float((rank + 1) * (1 + int(index % 7))); }

float allreduce_expected(int ranks, size_t index) { return float(ranks * (ranks + 1) / 2 * (1 + int(index % 7))); }

RankBuffers::RankBuffers(int device, int rank, size_t count)
    : device_(device), count_(count), send_(device, count * sizeof(float)), receive_(device, count * sizeof(float)) {
    std::vector<float> input(count);
    for (size_t i = 0; i < count; ++i) input[i] = allreduce_input(rank, i);
    CUDA_CHECK(cudaMemcpy(send_.get(), input.data(), count * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemset(receive_.get(), 0xFF, count * sizeof(float)));  // all ones: NaN, never a sum
}

void RankBuffers::allreduce(ncclComm_t comm, cudaStream_t stream) const {
    CUDA_CHECK(cudaSetDevice(device_));
    NCCL_CHECK(ncclAllReduce(send_.get(), receive_.get(), count_, ncclFloat, ncclSum, comm, stream));
}

long long RankBuffers::count_wrong(int ranks) const {
    std::vector<float> result(count_);
    CUDA_CHECK(cudaSetDevice(device_));
    CUDA_CHECK(cudaMemcpy(result.data(), receive_.get(), count_ * sizeof(float), cudaMemcpyDeviceToHost));
    long long wrong = 0;
    for (size_t i = 0; i < count_; ++i) wrong += result[i] != allreduce_expected(ranks, i);  // NaN never equals
    return wrong;
}

namespace {

void add_setting_notes(Finding& finding, const Variables& variables) {
    for (const auto& note : nccl_setting_notes(variables)) {
        finding.details.push_back("setting: " + note.text());
        if (note.slows && finding.status == Status::pass) {
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
    finding.next = kNcclAdvice;
    finding.details = warning_lines(capture.read());
    return finding;
}

Finding allreduce_over_all_gpus(const GpuSystem& system, const NcclOptions& options, const Deadline& deadline) {
    const int n = system.count;
    setenv("NCCL_NVLS_ENABLE", "0", 0);  // NVLink multicast stays off on the suite's machines; a user's setting wins
    const NcclLogCapture capture;        // before the first NCCL call of the process
    const std::string version = nccl_version_string();
    std::vector<int> devices(n);
    for (int device = 0; device < n; ++device) devices[device] = device;

    std::vector<ncclComm_t> comms;
    try {
        comms = nccl_init_all(devices, deadline.remaining());
    } catch (const EnvironmentError& error) {
        return nccl_failure(version, error, capture);
    }
    const size_t count = options.bytes / sizeof(float);
    std::vector<RankBuffers> buffers;
    std::vector<GpuStream> streams;
    for (int rank = 0; rank < n; ++rank) {
        buffers.emplace_back(rank, rank, count);
        streams.emplace_back(rank);
    }
    std::vector<cudaStream_t> stream_handles;
    for (const auto& stream : streams) stream_handles.push_back(stream.get());
    const auto run_allreduce = [&](bool leave_out_rank_0) {
        NCCL_CHECK(ncclGroupStart());
        for (int rank = 0; rank < n; ++rank)
            if (!(leave_out_rank_0 && rank == 0)) buffers[rank].allreduce(comms[rank], streams[rank].get());
        NCCL_CHECK(ncclGroupEnd());
        wait_for_nccl(comms, stream_handles, "NCCL allreduce of " + std::to_string(options.bytes >> 20) + " MiB",
                      deadline.remaining());
    };

    const std::string what = version + ": allreduce of " + std::to_string(options.bytes >> 20) + " MiB over " +
                             std::to_string(n) + " GPU" + (n > 1 ? "s" : "");
    std::vector<double> seconds;
    long long wrong = 0;
    try {
        run_allreduce(false);  // the first call also connects the GPUs
        for (int rank = 0; rank < n; ++rank) wrong += buffers[rank].count_wrong(n);
        for (int repetition = 0; repetition < 5 && wrong == 0; ++repetition) {
            const HostTimer timer;
            run_allreduce(options.injection.hang_nccl && repetition == 0);
            seconds.push_back(timer.seconds());
        }
    } catch (const EnvironmentError& error) {  // wait_for_nccl aborted the communicators
        return nccl_failure(version, error, capture);
    }
    const NcclLog log = capture.read();
    nccl_destroy_all(comms, deadline.remaining());

    Finding finding;
    finding.id = "nccl";
    finding.facts.add("version", version).add("bytes", static_cast<long long>(options.bytes)).add("wrong", wrong);
    if (wrong > 0) {
        finding.status = Status::fail;
        finding.summary = what + ": " + std::to_string(wrong) + " of " + std::to_string(count * n) +
                          " result elements wrong";
        finding.next = kNcclAdvice;
    } else {
        const double per_allreduce = median(seconds), busbw = bus_bandwidth(options.bytes, per_allreduce, n) / 1e9;
        char text[160];
        std::snprintf(text, sizeof text, ": correct, %.0f us, bus bandwidth %.1f GB/s", per_allreduce * 1e6, busbw);
        finding.summary = what + text;
        finding.facts.add("time_us", per_allreduce * 1e6).add("busbw_GBps", busbw);
    }
    finding.details = transport_lines(log, n, capture.capturing());
    for (const auto& line : warning_lines(log)) finding.details.push_back(line);
    finding.facts.add("transports", transport_json(log, n));
    return finding;
}

}  // namespace

Finding check_nccl(const GpuSystem& system, const Variables& variables, const NcclOptions& options,
                   const Deadline& deadline) {
    Finding finding = allreduce_over_all_gpus(system, options, deadline);
    add_setting_notes(finding, variables);
    return finding;
}

}  // namespace fwi::doctor
