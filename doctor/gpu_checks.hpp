// The checks that talk to the GPUs: 1 driver and devices, 2 topology, 3 P2P works, 4 P2P bandwidth and
// latency, 5 NCCL. Each returns a Finding; a wait on a GPU that passes the check's deadline throws
// DeviceHang (watchdog.hpp), which the caller turns into a FAIL and the end of the run.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <limits>
#include <string>
#include <vector>

#include "device.hpp"
#include "errors.hpp"
#include "host.hpp"
#include "nvml.hpp"
#include "other_processes.hpp"
#include "report.hpp"
#include "watchdog.hpp"

namespace fwi::doctor {

struct GpuSystem {
    int count = 0;                      // visible CUDA devices
    int opened = 0;                     // of them, how many check 1 opened (0 to opened - 1): it stops at a failure
    std::vector<std::string> names;     // "NVIDIA H200"
    std::vector<PciAddress> pci;        // per device
    std::vector<char> can_access;       // [i * count + j]: cudaDeviceCanAccessPeer(i, j)
    std::vector<Link> links;            // [i * count + j] from NVML; empty when NVML is not available
    std::vector<int> performance_rank;  // [i * count + j]: CUDA's cudaDevP2PAttrPerformanceRank (check 2)
    // Check 4's median one-way P2P copy bandwidth over the pairs with peer access (GB/s), what the links
    // carry; check 5 compares NCCL's bus bandwidth with it. NaN until check 4 has measured it.
    double p2p_one_way_GBps = std::numeric_limits<double>::quiet_NaN();

    bool peer(int i, int j) const { return can_access[size_t(i) * count + j] != 0; }
    // Whether every pair has peer access both ways; true where check 2 did not run, which is then not known.
    bool every_pair_has_peer_access() const;
    // The pairs with peer access (either way) whose link is PCIe (no NVLink), where the IOMMU and ACS matter.
    PeerPairs peer_pairs() const;
};

// The code of this build a GPU runs (check 1).
struct GpuCode {
    int device = 0;
    int compute_capability = 0;  // 90 for 9.0
    BuildCode code;
};

// The error for GPU `device`, visible but failing to open (`status` from creating its context), naming it, its
// PCI bus id and, where that is the cause, its compute mode (exclusive-process and held by another process,
// `holders` naming those NVML lists there, or prohibited); where `visible` GPUs are more than one, how to
// check the others meanwhile.
EnvironmentError gpu_not_opened(int device, cudaError_t status, const std::string& holders = "", int visible = 1);

// Whether a build for `architectures` (the build's list, comma-separated: "80-real,90-real,90-virtual") holds
// machine code for `architecture` (90): an entry of it that is not "-virtual" ("90", "90-real", "90a-real"),
// or a list nvcc chose ("all", "native"). A PTX-only entry ("90-virtual") is compiled when a program loads.
bool builds_machine_code_for(const std::string& architectures, int architecture);
// How a GPU runs the build: "runs sm_90 code", "runs compute_80 PTX compiled for sm_90", "runs compute_90
// PTX, compiled for sm_90 when a program loads" (a PTX-only build), "no code of this build it can run (...)".
std::string code_text(const BuildCode& code, const std::string& architectures);

// Check 1's verdict on the build, given each GPU's code and the build's CUDA architectures: FAIL when a
// GPU can run none of it (every program stops at its first kernel), WARN when a GPU of 9.0 or later runs
// PTX of an older architecture (the propagator then joins its steps without programmatic launch), else
// PASS; the summary and what to try are empty on a PASS.
Finding build_code_verdict(const std::vector<GpuCode>& gpus, const std::string& architectures);

// Check 1's verdict on the driver (CUDA versions as cudaDriverGetVersion gives them, 12030 for 12.3):
// WARN when it is older than the runtime the build uses. Programs still run (CUDA's minor version
// compatibility), but a call newer than the driver fails, and below 12.3 the propagator joins its steps
// without programmatic launch on GPUs whose code has the wait; else PASS.
Finding driver_verdict(int driver, int runtime, const std::vector<GpuCode>& gpus);

// Check 1's copies from pinned host memory to a GPU: their rate, the PCIe generation and width NVML reads
// while they run, and the packets the link resent meanwhile (its replay counter after them less before). Zero, and -1
// for the replays, where not measured (no memory for the buffers) or unknown.
struct HostCopy {
    double gbps = 0.0;
    int generation_under_load = 0;  // the most NVML read while the copies ran; 0 unknown
    long long replays = -1;
    int width_under_load = 0;  // likewise
};

// A GPU's PCIe link as check 1 judges it: read at rest (`at_rest`), with the generation read during its copies
// from the host where one was, and the wider of the two widths.
PcieLink link_under_load(PcieLink at_rest, const HostCopy& copy);

// Check 1's verdict on the GPUs' PCIe links, one per visible GPU (nvml.hpp; a width of 0 is unknown), with
// check 1's copies from the host to each (`copies`, one per link where made):
// WARN when a link has fewer lanes than its GPU and slot allow (its width the most read at rest or during the
// copies, as some GPUs narrow an idle link; x8 of x16: a link that trained narrower, through
// a riser, a poor contact or a BIOS lane setting; NVML's most already counts the slot, so a card in a slot wired
// for x8 reads x8 of x8), which divides every copy between that GPU and the host, and between GPUs without
// NVLink, by as much. Also WARN where a link's generation, read while the copies ran (the link's
// `generation` then), is below the most its GPU and slot allow (Gen4 of Gen5: a riser, a slot or a BIOS
// setting). And WARN where the copies reach under half of what the link carries at its width and its
// generation under load (a link at full width and generation that moves little: errors and replays, a riser,
// far host memory). And WARN where the link had to resend packets during the copies: a healthy link resends
// none, so any is a link error (a marginal riser, slot or cable), which slows every transfer over it. Else
// PASS. A generation read at rest is not judged: an idle GPU lowers it to save power.
Finding pcie_link_verdict(const std::vector<PcieLink>& links, const std::vector<HostCopy>& copies = {});
// What a PCIe link of `generation` and `width` lanes carries a direction, in GB/s, after its line encoding
// (3.94 GB/s a lane at Gen5); 0 for a generation this does not know.
double pcie_link_gbps(int generation, int width);

// Check 1's verdict on why the GPUs' clocks are lowered now (Nvml::clock_event_reasons, one mask per visible
// GPU; a GPU whose mask is unknown is left out): WARN where the hardware slows a GPU down (its slowdown
// signal, thermal, power brake) or the driver does for its temperature, as a slowed GPU sets the pace of every
// collective; else PASS. Idleness and the power cap under load are not faults, so not judged.
Finding clock_slowdown_verdict(const std::vector<std::pair<int, unsigned long long>>& reasons);

// Check 1's verdict on the GPUs' power limits (Nvml::power_limits, one per visible GPU; an unknown one is left
// out): WARN where a GPU's limit is set below 90% of its default (`nvidia-smi -pl`: a site's cap, or one
// left behind), as that GPU computes slower whenever it reaches the limit, and sets the pace of every
// collective; else PASS.
Finding power_limit_verdict(const std::vector<std::pair<int, Nvml::PowerLimits>>& limits);

// Check 1's verdict on the GPUs in MIG mode (Nvml::gpus_in_mig_mode, their PCI addresses): WARN where any of
// the `visible` GPUs is (CUDA gives an instance its GPU's address), as CUDA then sees a GPU's instances, not
// the GPU, and neither peer access nor NCCL works between instances (NCCL takes them for one GPU: they share
// its PCI address); else PASS. The others in MIG mode, another user's on a shared machine, are named in a
// detail line and not judged.
Finding mig_mode_verdict(const std::vector<std::string>& in_mig_mode, const std::vector<PciAddress>& visible);

// Check 2's verdict on the NVLinks that are up (Nvml::active_nvlinks; -1 unknown), with each GPU's model
// name and whether its links reach an NVSwitch: WARN where a GPU has fewer up than another of its model (a
// link down: its pairs lose bandwidth, and NCCL's rings through them slow down), else PASS. A GPU with none
// up is judged only where another of its model reaches a switch (on such a board every GPU is linked);
// cards joined by bridges may be bridged in part on purpose (check 2's table shows the counts).
Finding nvlink_count_verdict(const std::vector<std::string>& names, const std::vector<int>& active,
                             const std::vector<bool>& reaches_switch);

// Check 1's verdict on other processes on the GPUs (other_processes.hpp): WARN when there is one (whatever
// doctor and the programs time beside it is slower and varies), with a detail line each and one saying
// why a GPU's list is missing; else PASS.
Finding other_processes_verdict(const OtherProcesses& others);
// Check 1's facts on them: {"named": [{"gpu", "pid", "process", "used_bytes"}...], "unnamed": [{"gpu",
// "processes"}...], "hidden_on_gpus": [...], "unknown": why a list is missing, or null}.
JsonObject other_processes_json(const OtherProcesses& others);

// Check 1. Fills `system` (count 0 when no GPU is visible; the finding then says what the driver
// traces tell, and the run ends with exit code 3). `own_processes`: doctor's processes on this host (this
// one, and under --mpi the job's other ranks here), which are not counted as other processes. `deadline`:
// the check's, for its copies from the host.
Finding check_devices(const Variables& variables, const Nvml& nvml, const std::vector<unsigned>& own_processes,
                      GpuSystem& system, const Deadline& deadline);

// Check 1's health checks of the GPU this process holds as CUDA ordinal `device`, at rest, for doctor
// --mpi's ranks whose GPU rank 0's check 1 does not see (another host, a CUDA_VISIBLE_DEVICES of their
// own): its clocks, power limit and the other processes on it (`own_processes`: doctor's ranks on this
// host). No copies, so not its PCIe link. The summary says the problems (empty when it passes); SKIP where
// NVML cannot read the GPU.
Finding check_gpu_health(const Nvml& nvml, int device, const std::vector<unsigned>& own_processes);

// Why this process sees no GPU, as check 1 diagnoses it (the CUDA error, the driver's traces, NVML,
// CUDA_VISIBLE_DEVICES): check 7 asks it of every rank that sees none.
Finding diagnose_no_gpu_here(const Variables& variables, const Nvml& nvml);

// Check 2: peer access and P2P attributes of every pair, NVML's links, as a matrix.
Finding check_topology(const Nvml& nvml, GpuSystem& system);

struct P2pOptions {
    size_t pattern_bytes = size_t(4) << 20;  // per verified transfer
    Injection injection;
};
// Check 3: a staged copy, a direct peer copy and a peer-read kernel for every ordered pair, verified.
Finding check_p2p(const GpuSystem& system, const P2pOptions& options, const Deadline& deadline);

// The GPUs that take no more work, after a check's CUDA error: CUDA keeps some errors (a kernel's illegal
// address, which is how a peer read the IOMMU refuses ends) in the GPU's context for the rest of the process,
// and returns them from every later call there. "GPU 0 (cudaErrorIllegalAddress)" for each, comma-separated;
// "" when every GPU takes work (errors it does not keep are cleared).
std::string gpus_refusing_work(const GpuSystem& system);

struct BandwidthOptions {
    size_t bytes = size_t(64) << 20;  // per copy
    int repeats = 5;                  // timed copies per cell (the median is shown), after one warm-up
    bool cross_check = false;         // also time 10 back-to-back 256 MiB copies per pair, events around the loop
};
// Check 4: unidirectional and bidirectional bandwidth and latency matrices, P2P on and off; sets
// system.p2p_one_way_GBps.
Finding check_bandwidth(GpuSystem& system, const BandwidthOptions& options, const Deadline& deadline);

struct NcclOptions {
    size_t largest_bytes = size_t(256) << 20;  // the largest size timed (nccl_check_sizes, nccl_verdict.hpp)
    Injection injection;
};
// Check 5: a single-process allreduce over every GPU, on communicators made with the deadline (nccl_comm.hpp):
// checked, timed at 1 MiB, 32 MiB and options.largest_bytes, and compared with what the links carry
// (system.p2p_one_way_GBps from check 4, the peer access of check 2); WARN when NCCL goes around them.
Finding check_nccl(const GpuSystem& system, const Variables& variables, const NcclOptions& options,
                   const Deadline& deadline);

}  // namespace fwi::doctor
