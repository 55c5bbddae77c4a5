// Checks 3 (P2P works: data verified) and 4 (P2P bandwidth and latency matrices, like NVIDIA's
// p2pBandwidthLatencyTest, written here from scratch). "P2P on" is a copy between GPUs with peer access
// enabled (the copy engines move data over NVLink or PCIe directly); "P2P off" is the same
// cudaMemcpyPeerAsync without cudaDeviceEnablePeerAccess, which the driver stages through host memory.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <optional>
#include <vector>

#include "bandwidth_verdict.hpp"
#include "cuda_check.hpp"
#include "cuda_timing.hpp"
#include "device.hpp"
#include "errors.hpp"
#include "gpu_checks.hpp"
#include "gpu_waits.hpp"
#include "p2p_pattern.hpp"
#include "timing.hpp"

namespace fwi::doctor {

namespace {

constexpr int kThreads = 256;

unsigned blocks_for(size_t count) { return grid_stride_blocks(count, kThreads, 1024); }

__global__ void fill_pattern_kernel(uint32_t* data, size_t words, int source_gpu) {
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < words; i += size_t(gridDim.x) * blockDim.x)
        data[i] = pattern_word(source_gpu, i);
}

// Runs on the reading GPU; `peer` is the other GPU's memory, reached through peer access.
__global__ void read_peer_kernel(const uint32_t* peer, uint32_t* local, size_t words) {
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < words; i += size_t(gridDim.x) * blockDim.x)
        local[i] = peer[i];
}

// Fault injection (hang-peer-kernel): waits for a word in the peer's memory that nobody ever sets, the
// way a peer read over a broken link never returns.
__global__ void wait_for_peer_flag_kernel(const volatile uint32_t* flag) {
    while (*flag == 0) {
    }
}

// Disables peer access between every pair that supports it, so that copies are staged through host
// memory ("P2P off"), whatever enabled it before. Disabling what was never enabled is not an error.
void disable_peer_access(const GpuSystem& system) {
    for (int i = 0; i < system.count; ++i) {
        CUDA_CHECK(cudaSetDevice(i));
        for (int j = 0; j < system.count; ++j) {
            if (i == j || !system.peer(i, j)) continue;
            const cudaError_t status = cudaDeviceDisablePeerAccess(j);
            if (status == cudaErrorPeerAccessNotEnabled)
                cudaGetLastError();  // clear it: not a failure
            else
                CUDA_CHECK(status);
        }
    }
}

// Peer access from GPU `reader` to the memory of GPU `owner` while it lives, where the topology allows it.
// Only what it enabled itself is disabled again; the work that used it must have finished.
class OneWayPeerAccess {
public:
    OneWayPeerAccess(const GpuSystem& system, int reader, int owner) : reader_(reader), owner_(owner) {
        if (!system.peer(reader, owner)) return;
        CUDA_CHECK(cudaSetDevice(reader));
        const cudaError_t status = cudaDeviceEnablePeerAccess(owner, 0);
        if (status == cudaErrorPeerAccessAlreadyEnabled) {
            cudaGetLastError();  // clear it: enabled before, and left so
            return;
        }
        if (status != cudaSuccess) {  // (an IOMMU or hypervisor in the way, or too many peers)
            cudaGetLastError();
            const std::string hint = cuda_error_hint(status);
            throw EnvironmentError("GPU " + std::to_string(reader) + " cannot enable peer access to GPU " +
                                   std::to_string(owner) +
                                   ", which cudaDeviceCanAccessPeer reports possible: " + cudaGetErrorName(status) +
                                   " (" + cudaGetErrorString(status) + ")" + (hint.empty() ? "" : ": " + hint));
        }
        enabled_ = true;
    }
    ~OneWayPeerAccess() {
        if (!enabled_ || gpu_work_abandoned()) return;  // a hung transfer may still use it
        cudaSetDevice(reader_);
        if (cudaDeviceDisablePeerAccess(owner_) != cudaSuccess) cudaGetLastError();  // a destructor cannot throw
    }
    OneWayPeerAccess(const OneWayPeerAccess&) = delete;
    OneWayPeerAccess& operator=(const OneWayPeerAccess&) = delete;

private:
    int reader_, owner_;
    bool enabled_ = false;
};

// Peer access between GPUs i and j, both ways, for one measurement. Like NVIDIA's p2pBandwidthLatencyTest,
// doctor enables one pair at a time: a GPU can have peer access to only so many others at once (8 on a
// machine without NVSwitch), so enabling every pair fails on a machine with more GPUs.
struct PairPeerAccess {
    PairPeerAccess(const GpuSystem& system, int i, int j) : i_reads_j(system, i, j), j_reads_i(system, j, i) {}
    OneWayPeerAccess i_reads_j, j_reads_i;  // if the second throws, the first is undone
};

std::string gpu(int device) { return "GPU " + std::to_string(device); }

// ---- check 3 ----

enum Transfer { kStaged, kDirect, kKernel, kTransfers };
const char* const kTransferNames[kTransfers] = {"staged_copy", "direct_copy", "peer_read_kernel"};
const char* const kTransferTexts[kTransfers] = {"copy without peer access (staged by the driver)",
                                                "peer copy (peer access on)", "peer-read kernel"};

const char* const kPeerDataAdvice =
    "wrong data over P2P: on PCIe, disable ACS on the switches between the GPUs (BIOS or setpci) and boot with "
    "iommu=pt (or the IOMMU off); in a VM the hypervisor must support P2P; look at `nvidia-smi topo -p2p r`, `lspci "
    "-vvv | grep -i acsctl`, `dmesg | grep -i -e iommu -e dmar -e amd-vi -e io_page_fault -e xid` (the IOMMU's faults, "
    "as Intel's and AMD's "
    "drivers word them); until fixed, NCCL_P2P_DISABLE=1 keeps NCCL correct "
    "(slower)";
const char* const kStagedDataAdvice =
    "even copies staged through the host are wrong: suspect the GPU or its memory, not P2P: `nvidia-smi -q -d ECC`, "
    "`dmesg | grep -i xid`, and NVIDIA's DCGM diagnostics (dcgmi diag -r 2)";
const char* const kPeerHangAdvice =
    "a peer transfer that never ends: the P2P path is broken (IOMMU/ACS on PCIe, an NVLink down: `nvidia-smi nvlink "
    "-s`, `dmesg | grep -i -e xid -e dmar -e amd-vi -e io_page_fault`); GPU work cannot be cancelled, so doctor stops "
    "here; if the GPU stays busy "
    "afterwards, reset it (`nvidia-smi -r`, as root: it ends every job on that GPU); meanwhile NCCL_P2P_DISABLE=1 "
    "avoids P2P";

const char* const kPeerErrorAdvice =
    "peer access refused, or a peer transfer that ends in a CUDA error (an illegal address: the IOMMU refused the "
    "peer's address, or the link failed): in a VM the hypervisor must support P2P; on PCIe, disable ACS on the "
    "switches between the GPUs and boot with iommu=pt (or the IOMMU off); "
    "`dmesg | grep -i -e xid -e dmar -e amd-vi -e io_page_fault` names the fault; until fixed, NCCL_P2P_DISABLE=1 "
    "keeps NCCL off P2P";
const char* const kStagedErrorAdvice =
    "even a copy staged through the host ends in a CUDA error: suspect the GPU or its driver, not P2P: `dmesg | grep "
    "-i xid`, `nvidia-smi -q -d ECC`, and NVIDIA's DCGM diagnostics (dcgmi diag -r 2)";

// Runs a check body; a transfer that hangs gets the P2P advice attached on its way to the runner, and one
// that ends in a CUDA error (check 4's: check 3 reports its transfers' own), or peer access refused, a FAIL
// with the P2P advice.
template <typename Body>
Finding with_peer_advice(const std::string& id, const Body& body) {
    try {
        return body();
    } catch (DeviceHang& hang) {
        hang.next_step = kPeerHangAdvice;
        throw;
    } catch (const DeviceMemoryError&) {
        throw;  // the buffers, not the path: the runner's FAIL names the memory
    } catch (const EnvironmentError& error) {
        Finding finding;
        finding.id = id;
        finding.status = Status::fail;
        finding.summary = error.what();
        finding.next = kPeerErrorAdvice;
        return finding;
    }
}

class PeerDataTest {
public:
    PeerDataTest(const GpuSystem& system, const P2pOptions& options, const Deadline& deadline)
        : options_(options), deadline_(deadline), words_(options.pattern_bytes / sizeof(uint32_t)) {
        for (int device = 0; device < system.count; ++device) {
            sources_.emplace_back(device, words_);
            destinations_.emplace_back(device, words_);
            flags_.emplace_back(device, 1);
            streams_.emplace_back(device);
            const cudaStream_t stream = streams_.back().get();
            CUDA_CHECK(cudaMemsetAsync(flags_.back().data(), 0, sizeof(uint32_t), stream));
            fill_pattern_kernel<<<blocks_for(words_), kThreads, 0, stream>>>(sources_.back().data(), words_, device);
            CUDA_CHECK_LAUNCH();
        }
        for (int device = 0; device < system.count; ++device)
            finish(streams_[device], deadline, "filling " + gpu(device) + "'s buffer");
    }

    // `reader` receives `source`'s pattern by `transfer`; returns what arrived.
    PatternCheck run(int reader, int source, Transfer transfer) {
        const cudaStream_t stream = streams_[reader].get();
        const size_t bytes = words_ * sizeof(uint32_t);
        uint32_t* destination = destinations_[reader].data();
        const bool first_pair = reader == 0 && source == 1;
        CUDA_CHECK(cudaSetDevice(reader));
        CUDA_CHECK(cudaMemsetAsync(destination, kPoisonByte, bytes, stream));
        if (transfer == kKernel) {
            if (first_pair && options_.injection.hang_peer_kernel)
                wait_for_peer_flag_kernel<<<1, 1, 0, stream>>>(flags_[source].data());
            // (Address 0 maps to nothing on any GPU: the read faults, as a peer read the IOMMU refuses does.)
            const uint32_t* peer =
                first_pair && options_.injection.fault_peer_kernel ? nullptr : sources_[source].data();
            read_peer_kernel<<<blocks_for(words_), kThreads, 0, stream>>>(peer, destination, words_);
            CUDA_CHECK_LAUNCH();
            if (first_pair && options_.injection.corrupt_peer)
                CUDA_CHECK(
                    cudaMemsetAsync(destination + words_ / 2, 0, (words_ - words_ / 2) * sizeof(uint32_t), stream));
        } else {
            CUDA_CHECK(cudaMemcpyPeerAsync(destination, reader, sources_[source].data(), source, bytes, stream));
        }
        finish(streams_[reader], deadline_, gpu(reader) + "'s " + kTransferTexts[transfer] + " from " + gpu(source));
        std::vector<uint32_t> arrived(words_);
        CUDA_CHECK(cudaMemcpy(arrived.data(), destination, bytes, cudaMemcpyDeviceToHost));  // the stream is idle
        return check_pattern(arrived.data(), words_, source);
    }

private:
    const P2pOptions& options_;
    const Deadline& deadline_;
    size_t words_;
    std::vector<DeviceBuffer<uint32_t>> sources_, destinations_, flags_;
    std::vector<CudaStream> streams_;
};

// ---- check 4 ----

constexpr size_t kLatencyBytes = 4;
constexpr int kLatencyCopies = 100;
constexpr size_t kCrossCheckBytes = size_t(256) << 20;
constexpr int kCrossCheckCopies = 10;

class CopyTimer {
public:
    CopyTimer(const GpuSystem& system, const BandwidthOptions& options, const Deadline& deadline)
        : options_(options), deadline_(deadline) {
        for (int device = 0; device < system.count; ++device) {
            sources_.emplace_back(device, options.bytes);
            destinations_.emplace_back(device, options.bytes);
            streams_.emplace_back(device);
            markers_.emplace_back(device);
            CUDA_CHECK(cudaMemsetAsync(sources_.back().data(), 1, options.bytes, streams_.back().get()));
        }
    }

    // Seconds of one copy of `bytes` from GPU `from` to GPU `to` (the same GPU: a local copy), on the
    // source's stream: the median of `repeats` timed copies after one warm-up.
    double one_way(int from, int to, size_t bytes, int copies, int repeats) {
        return median_seconds(
                   from, repeats, "copy " + gpu(from) + " -> " + gpu(to),
                   [&] {
                       for (int copy = 0; copy < copies; ++copy)
                           CUDA_CHECK(cudaMemcpyPeerAsync(destinations_[to].data(), to, sources_[from].data(), from,
                                                          bytes, streams_[from].get()));
                   }) /
               copies;
    }

    // Seconds of two simultaneous copies i -> j and j -> i, each on its source's stream.
    double both_ways(int i, int j) {
        return median_seconds(i, options_.repeats, "copies between " + gpu(i) + " and " + gpu(j), [&] {
            // GPU j's copy starts with GPU i's, and GPU i's stream ends after both (so its events time both).
            CUDA_CHECK(cudaEventRecord(markers_[i].get(), streams_[i].get()));
            CUDA_CHECK(cudaStreamWaitEvent(streams_[j].get(), markers_[i].get(), 0));
            CUDA_CHECK(cudaMemcpyPeerAsync(destinations_[j].data(), j, sources_[i].data(), i, options_.bytes,
                                           streams_[i].get()));
            CUDA_CHECK(cudaMemcpyPeerAsync(destinations_[i].data(), i, sources_[j].data(), j, options_.bytes,
                                           streams_[j].get()));
            CUDA_CHECK(cudaEventRecord(markers_[j].get(), streams_[j].get()));
            CUDA_CHECK(cudaStreamWaitEvent(streams_[i].get(), markers_[j].get(), 0));
        });
    }

    // Bandwidth of `kCrossCheckCopies` back-to-back copies of 256 MiB with cudaMemcpyAsync (UVA), events
    // around the whole loop: how copy-engine bandwidth is usually measured, to compare with one_way().
    double loop_bandwidth(int from, int to) {
        const DeviceBuffer<char> source(from, kCrossCheckBytes), destination(to, kCrossCheckBytes);
        const CudaEvent start(from, CudaEvent::Timing::on), stop(from, CudaEvent::Timing::on);
        const cudaStream_t stream = streams_[from].get();
        CUDA_CHECK(cudaSetDevice(from));
        CUDA_CHECK(cudaMemcpyAsync(destination.data(), source.data(), kCrossCheckBytes, cudaMemcpyDefault, stream));
        CUDA_CHECK(cudaEventRecord(start.get(), stream));
        for (int copy = 0; copy < kCrossCheckCopies; ++copy)
            CUDA_CHECK(cudaMemcpyAsync(destination.data(), source.data(), kCrossCheckBytes, cudaMemcpyDefault, stream));
        CUDA_CHECK(cudaEventRecord(stop.get(), stream));
        wait_for_event(stop.get(), deadline_, "cross-check copies " + gpu(from) + " -> " + gpu(to));
        return double(kCrossCheckCopies) * kCrossCheckBytes / elapsed_seconds(start, stop);
    }

private:
    double median_seconds(int device, int repeats, const std::string& what, const std::function<void()>& enqueue) {
        std::vector<CudaEvent> starts, stops;
        for (int r = 0; r < repeats; ++r) {
            starts.emplace_back(device, CudaEvent::Timing::on);
            stops.emplace_back(device, CudaEvent::Timing::on);
        }
        const cudaStream_t stream = streams_[device].get();
        CUDA_CHECK(cudaSetDevice(device));
        enqueue();  // warm-up
        for (int r = 0; r < repeats; ++r) {
            CUDA_CHECK(cudaEventRecord(starts[r].get(), stream));
            enqueue();
            CUDA_CHECK(cudaEventRecord(stops[r].get(), stream));
        }
        wait_for_event(stops.back().get(), deadline_, what);
        std::vector<double> seconds;
        for (int r = 0; r < repeats; ++r) seconds.push_back(elapsed_seconds(starts[r], stops[r]));
        return median(seconds);
    }

    const BandwidthOptions& options_;
    const Deadline& deadline_;
    std::vector<DeviceBuffer<char>> sources_, destinations_;
    std::vector<CudaStream> streams_;
    std::vector<CudaEvent> markers_;
};

struct BandwidthMatrices {
    explicit BandwidthMatrices(int n)
        : one_way_on(n), one_way_off(n), both_ways_on(n), both_ways_off(n), latency_on(n), latency_off(n) {}
    Matrix one_way_on, one_way_off, both_ways_on, both_ways_off, latency_on, latency_off;  // GB/s, GB/s, us
};

// Checks 3 and 4 start no transfer past half their time limit, the rest being the margin for the last wait:
// many GPUs, or slow staging in a VM, then end in a WARN with the rest not run, rather than in a last wait
// past the deadline (reported as a GPU that hangs).
bool past_start_budget(const Deadline& deadline) { return deadline.elapsed() > deadline.seconds() / 2; }

// Fills the P2P-on or P2P-off matrices; returns false when it stopped at the time budget.
bool measure(const GpuSystem& system, const BandwidthOptions& options, CopyTimer& timer, bool p2p_on,
             BandwidthMatrices& m, const Deadline& deadline) {
    const int n = system.count;
    Matrix& one_way = p2p_on ? m.one_way_on : m.one_way_off;
    Matrix& both_ways = p2p_on ? m.both_ways_on : m.both_ways_off;
    Matrix& latency = p2p_on ? m.latency_on : m.latency_off;
    disable_peer_access(system);  // P2P on: only the pair measured has it
    for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j) {
            const bool local = i == j;
            if (p2p_on && !local && !system.peer(i, j)) continue;
            if (past_start_budget(deadline)) return false;
            if (local && !p2p_on) {  // a copy within one GPU does not depend on peer access
                one_way.at(i, i) = m.one_way_on.at(i, i);
                latency.at(i, i) = m.latency_on.at(i, i);
                continue;
            }
            std::optional<PairPeerAccess> access;
            if (p2p_on && !local) access.emplace(system, i, j);
            one_way.at(i, j) = options.bytes / timer.one_way(i, j, options.bytes, 1, options.repeats) / 1e9;
            latency.at(i, j) = timer.one_way(i, j, kLatencyBytes, kLatencyCopies, 3) * 1e6;
        }
    for (int i = 0; i < n; ++i)
        for (int j = i + 1; j < n; ++j) {
            if (p2p_on && !(system.peer(i, j) && system.peer(j, i))) continue;
            if (past_start_budget(deadline)) return false;
            std::optional<PairPeerAccess> access;
            if (p2p_on) access.emplace(system, i, j);
            both_ways.at(i, j) = both_ways.at(j, i) = 2.0 * options.bytes / timer.both_ways(i, j) / 1e9;
        }
    return true;
}

void add_matrix(Finding& finding, const std::string& title, const Matrix& matrix, const char* format) {
    finding.details.push_back(title);
    for (const auto& line : format_matrix(matrix.n, "", 9, [&](int i, int j) {
             return i == j && std::isnan(matrix.at(i, j)) ? std::string("-") : number(matrix.at(i, j), format);
         }))
        finding.details.push_back(line);
}

JsonObject json_of(const Matrix& matrix) {
    return matrix_json(matrix.n, true, [&](int i, int j) { return matrix.at(i, j); });
}

void add_cross_check(Finding& finding, const GpuSystem& system, const BandwidthMatrices& m, CopyTimer& timer,
                     const Deadline& deadline) {
    finding.details.push_back("cross-check: the matrix (median of single timed copies) against " +
                              std::to_string(kCrossCheckCopies) +
                              " back-to-back 256 MiB cudaMemcpyAsync, events around the loop:");
    JsonObject json;
    bool complete = true;
    for (int i = 0; i < system.count && complete; ++i)
        for (int j = 0; j < system.count && complete; ++j) {
            if (i == j || std::isnan(m.one_way_on.at(i, j))) continue;
            if (!cross_check_fits((kCrossCheckCopies + 1) * double(kCrossCheckBytes), m.one_way_on.at(i, j),
                                  deadline.remaining())) {  // the copies and their warm-up
                complete = false;
                break;
            }
            const PairPeerAccess access(system, i, j);
            const double loop = timer.loop_bandwidth(i, j) / 1e9, ratio = m.one_way_on.at(i, j) / loop;
            finding.details.push_back("  " + gpu(i) + " -> " + gpu(j) + ": matrix " +
                                      number(m.one_way_on.at(i, j), "%.1f") + " GB/s, loop " + number(loop, "%.1f") +
                                      " GB/s, ratio " + number(ratio, "%.3f"));
            json.add(std::to_string(i) + "->" + std::to_string(j), loop);
            if (std::abs(ratio - 1.0) > 0.1 && finding.status == Status::pass) {
                finding.status = Status::warn;
                finding.next = "the two timings differ by more than 10%: rerun; other traffic on the GPUs?";
            }
        }
    finding.facts.add("cross_check_loop_GBps", json).add("cross_check_complete", complete);
    if (!complete) {
        finding.details.push_back("  the other pairs are left out: their copies would not end within the time limit");
        if (finding.status == Status::pass) {
            finding.status = Status::warn;
            finding.next = "raise --timeout to cross-check every pair";
        }
        finding.summary += "; cross-check stopped before the time limit, some pairs left out";
    }
}

Finding verify_peer_data(const GpuSystem& system, const P2pOptions& options, const Deadline& deadline) {
    const int n = system.count;
    std::vector<std::vector<PatternCheck>> results(kTransfers, std::vector<PatternCheck>(size_t(n) * n));
    std::vector<std::vector<bool>> ran(kTransfers, std::vector<bool>(size_t(n) * n, false));
    std::vector<std::vector<bool>> failed(kTransfers, std::vector<bool>(size_t(n) * n, false));
    PeerDataTest test(system, options, deadline);
    bool complete = true;
    // The first transfer that ends in a CUDA error, and the error: the transfers stop there, as the error may
    // stay in the reading GPU's CUDA context for the rest of the process (doctor then skips the later checks).
    std::string error_line;
    bool staged_error = false;
    // Marks `transfers` of the pair failed with `error`: nothing more runs, not even the next pair's peer
    // access (the error may stay in a context).
    const auto stop_at_error = [&](int reader, int source, std::vector<Transfer> transfers, const std::string& what,
                                   const std::exception& error) {
        complete = false;
        for (Transfer transfer : transfers) failed[transfer][size_t(reader) * n + source] = true;
        staged_error = transfers.front() == kStaged;
        error_line = gpu(reader) + " <- " + gpu(source) + ", " + what + ": " + error.what();
    };
    const auto run = [&](int reader, int source, Transfer transfer) {
        complete = complete && !past_start_budget(deadline);
        if (!complete) return;
        const size_t at = size_t(reader) * n + source;
        try {
            results[transfer][at] = test.run(reader, source, transfer);
            ran[transfer][at] = true;
        } catch (const DeviceMemoryError&) {
            throw;  // the host's copy of what arrived: the runner's FAIL names the memory
        } catch (const EnvironmentError& error) {
            stop_at_error(reader, source, {transfer}, kTransferTexts[transfer], error);
        }
    };
    disable_peer_access(system);
    for (int reader = 0; reader < n; ++reader)
        for (int source = 0; source < n; ++source)
            if (reader != source) run(reader, source, kStaged);
    for (int reader = 0; reader < n && complete; ++reader)
        for (int source = 0; source < n && complete; ++source)
            if (reader != source && system.peer(reader, source)) {
                std::optional<PairPeerAccess> access;
                try {
                    access.emplace(system, reader, source);
                } catch (const EnvironmentError& error) {  // refused: an IOMMU or hypervisor in the way
                    stop_at_error(reader, source, {kDirect, kKernel}, "peer access", error);
                    break;
                }
                for (Transfer transfer : {kDirect, kKernel}) run(reader, source, transfer);
            }

    Finding finding;
    finding.id = "p2p";
    int transfers = 0, wrong = 0, pairs_without_access = 0;
    bool staged_wrong = false;
    for (int reader = 0; reader < n; ++reader)
        for (int source = 0; source < n; ++source) {
            if (reader == source) continue;
            pairs_without_access += !system.peer(reader, source);
            for (int transfer = 0; transfer < kTransfers; ++transfer) {
                const size_t at = size_t(reader) * n + source;
                if (!ran[transfer][at]) continue;
                ++transfers;
                if (results[transfer][at].ok()) continue;
                staged_wrong = staged_wrong || transfer == kStaged;
                const std::string line = gpu(reader) + " <- " + gpu(source) + ", " + kTransferTexts[transfer] + ": " +
                                         describe(results[transfer][at]);
                if (wrong++ == 0) finding.summary = line;
                finding.details.push_back(line);
            }
        }
    if (!error_line.empty()) finding.details.push_back(error_line);
    finding.details.push_back(
        "row = the GPU that receives, column = the GPU whose memory is read; S D K = staged copy, peer copy, peer-read "
        "kernel: + correct, x wrong, E a CUDA error, - not run (no peer access, after an error, or past the time "
        "budget)");
    for (const auto& line : format_matrix(n, "", 7, [&](int reader, int source) {
             if (reader == source) return std::string("X");
             std::string cell;
             for (int transfer = 0; transfer < kTransfers; ++transfer) {
                 const size_t at = size_t(reader) * n + source;
                 cell += failed[transfer][at] ? 'E' : !ran[transfer][at] ? '-' : results[transfer][at].ok() ? '+' : 'x';
             }
             return cell;
         }))
        finding.details.push_back(line);
    for (int transfer = 0; transfer < kTransfers; ++transfer)
        finding.facts.add(kTransferNames[transfer], matrix_json(n, false, [&](int reader, int source) {
                              const size_t at = size_t(reader) * n + source;
                              return failed[transfer][at] ? std::string("CUDA error")
                                     : ran[transfer][at]  ? describe(results[transfer][at])
                                                          : std::string("not run");
                          }));
    finding.facts.add("pattern_bytes", static_cast<long long>(options.pattern_bytes));

    if (!error_line.empty()) {
        finding.status = Status::fail;
        finding.summary =
            error_line + (wrong > 0 ? " (and " + std::to_string(wrong) + " transfers wrong before it)" : "");
        finding.next = staged_error ? kStagedErrorAdvice : kPeerErrorAdvice;
        return finding;
    }
    if (wrong > 0) {
        finding.status = Status::fail;
        finding.summary += " (" + std::to_string(wrong) + " of " + std::to_string(transfers) + " transfers wrong)";
        finding.next = staged_wrong ? kStagedDataAdvice : kPeerDataAdvice;
    } else {
        finding.summary = "all " + std::to_string(transfers) + " transfers between " + std::to_string(n) +
                          " GPUs returned the exact pattern";
        if (pairs_without_access)
            finding.summary += "; " + std::to_string(pairs_without_access) +
                               " ordered pairs without peer access were checked with staged copies only";
    }
    if (!complete) {
        if (wrong == 0) finding.status = Status::warn;
        finding.summary += "; stopped at half the time limit, the rest not run (-)";
        if (finding.next.empty()) finding.next = "raise --timeout to check every pair";
    }
    return finding;
}

Finding measure_bandwidth(GpuSystem& system, const BandwidthOptions& options, const Deadline& deadline) {
    const int n = system.count;
    BandwidthMatrices m(n);
    Finding finding;
    finding.id = "bandwidth";
    CopyTimer timer(system, options, deadline);
    const bool complete =
        measure(system, options, timer, true, m, deadline) && measure(system, options, timer, false, m, deadline);

    const std::string size = std::to_string(options.bytes >> 20) + " MiB";
    add_matrix(finding,
               "one way, P2P on (GB/s, " + size +
                   " copies; row = source GPU, column = destination; diagonal = a copy within one GPU):",
               m.one_way_on, "%.1f");
    add_matrix(finding, "one way, P2P off (GB/s; staged through host memory by the driver):", m.one_way_off, "%.1f");
    add_matrix(finding, "both ways at once, P2P on (GB/s, the two directions added):", m.both_ways_on, "%.1f");
    add_matrix(finding, "both ways at once, P2P off (GB/s):", m.both_ways_off, "%.1f");
    add_matrix(
        finding,
        "latency of a 4-byte copy, P2P on (us, from " + std::to_string(kLatencyCopies) + " back-to-back copies):",
        m.latency_on, "%.2f");
    add_matrix(finding, "latency of a 4-byte copy, P2P off (us):", m.latency_off, "%.2f");
    finding.facts.add("bytes", static_cast<long long>(options.bytes))
        .add("one_way_p2p_on_GBps", json_of(m.one_way_on))
        .add("one_way_p2p_off_GBps", json_of(m.one_way_off))
        .add("both_ways_p2p_on_GBps", json_of(m.both_ways_on))
        .add("both_ways_p2p_off_GBps", json_of(m.both_ways_off))
        .add("latency_p2p_on_us", json_of(m.latency_on))
        .add("latency_p2p_off_us", json_of(m.latency_off));

    const double one_way_on = median_of_measured(m.one_way_on), both_ways_on = median_of_measured(m.both_ways_on);
    const double one_way_off = median_of_measured(m.one_way_off), latency_on = median_of_measured(m.latency_on);
    const double latency_off = median_of_measured(m.latency_off);
    finding.summary = "medians over pairs: P2P on " + number(one_way_on, "%.1f") + " GB/s one way, " +
                      number(both_ways_on, "%.1f") + " GB/s both ways, " + number(latency_on, "%.2f") +
                      " us; P2P off " + number(one_way_off, "%.1f") + " GB/s, " + number(latency_off, "%.2f") + " us";
    system.p2p_one_way_GBps = one_way_on;  // what check 5 compares NCCL's bus bandwidth with
    finding.facts.add("median_one_way_p2p_on_GBps", one_way_on)
        .add("median_both_ways_p2p_on_GBps", both_ways_on)
        .add("median_one_way_p2p_off_GBps", one_way_off)
        .add("median_latency_p2p_on_us", latency_on)
        .add("median_latency_p2p_off_us", latency_off)
        .add("complete", complete);

    const std::vector<std::string> problems = bandwidth_problems(system, m.one_way_on, m.one_way_off);
    for (const auto& problem : problems) finding.details.push_back("slow: " + problem);
    if (!problems.empty()) {
        finding.status = Status::warn;
        finding.summary =
            problems.front() + (problems.size() > 1 ? " (and " + std::to_string(problems.size() - 1) + " more)" : "");
        finding.next =
            "a degraded NVLink (`nvidia-smi nvlink -s`, `nvidia-smi nvlink -e`) or a PCIe link trained at a lower "
            "width or generation (`nvidia-smi -q | grep -i -A3 'link width'`); for P2P slower than staging, what each "
            "pair's line says of its path; and another process copying or computing on those GPUs slows them too "
            "(check 1 names those it sees)";
    }
    if (!complete) {
        finding.status = Status::warn;
        finding.summary += "; stopped at half the time limit, the rest is n/a";
        finding.next = "raise --timeout or lower --bandwidth-mib to measure every pair";
    }
    if (options.cross_check && complete) add_cross_check(finding, system, m, timer, deadline);
    return finding;
}

}  // namespace

Finding check_p2p(const GpuSystem& system, const P2pOptions& options, const Deadline& deadline) {
    if (system.count < 2) return skipped("p2p", "one GPU visible: no pairs to check");
    return with_peer_advice("p2p", [&] { return verify_peer_data(system, options, deadline); });
}

Finding check_bandwidth(GpuSystem& system, const BandwidthOptions& options, const Deadline& deadline) {
    if (system.count < 2) return skipped("bandwidth", "one GPU visible: no pairs to measure");
    return with_peer_advice("bandwidth", [&] { return measure_bandwidth(system, options, deadline); });
}

}  // namespace fwi::doctor
