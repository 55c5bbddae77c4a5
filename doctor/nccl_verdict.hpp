// What check 5 makes of its measurements besides correctness: the sizes it times, the table of their
// timings, and two signs that NCCL is not using the links between the GPUs: a transport that goes around
// peer access (SHM or NET between GPUs that have it), and a bus bandwidth far below what check 4's P2P
// copies reached. Neither depends on seeing NCCL_P2P_DISABLE in doctor's own environment (a site-wide
// /etc/nccl.conf can set it too). No GPU or NCCL call here, so all of it is unit-tested.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "allreduce_sweep.hpp"
#include "gpu_checks.hpp"
#include "host.hpp"
#include "nccl_log.hpp"

namespace fwi::doctor {

constexpr size_t kMiB = size_t(1) << 20;

// The size the summary line reports, and the size of check 7's allreduce (--nccl-mib when smaller).
constexpr size_t kNcclSummaryBytes = 32 * kMiB;

// The sizes check 5 times: 1 MiB (bound by latency), 32 MiB and `largest` (--nccl-mib, default 256 MiB,
// where the bus bandwidth nears what the links carry), without those above `largest`. Ascending, no
// duplicates.
std::vector<size_t> nccl_check_sizes(size_t largest);

// The row the summary reports: the largest size up to kNcclSummaryBytes (rows ascending, not empty).
const SweepRow& nccl_summary_row(const std::vector<SweepRow>& rows);

// The timing table: how it was timed, then one line per size (MiB, allreduces per batch, time of one,
// algbw and busbw as nccl-tests defines them, over `gpus` GPUs).
std::vector<std::string> nccl_timing_lines(const std::vector<SweepRow>& rows, int gpus,
                                           const AllreduceSweepOptions& timing);

// A healthy NCCL allreduce at a large size carries most of what a copy engine moves over the same link:
// on NVLink H200s NCCL's busbw at 256 MiB is about 290 GB/s against 381 GB/s for a one-way P2P copy
// (check 4), a ratio of about 0.75. When NCCL goes through host memory (SHM) or the network instead, host
// memory or the NIC bounds it: a copy staged through host memory moves 37 GB/s on the same H200s, under
// 0.1 of the P2P figure. A quarter sits well between the two, so a WARN below it is not noise.
constexpr double kLowBusBandwidthShare = 0.25;
// Below this size an allreduce is too short for its bus bandwidth to say much about the links.
constexpr size_t kLinkComparisonMinBytes = 32 * kMiB;

// The line that compares the largest size's busbw with check 4's P2P figure, whatever the verdict: "links:
// busbw 338.2 GB/s at 256 MiB is 88% of the 383.6 GB/s one way of check 4's P2P copies (WARN below 25%, ...)",
// or why there is nothing to compare. NCCL's ring passes every GPU: where some pair has no peer access it
// may have to go through host memory there, whatever the pairs with peer access reach, so it is not
// compared then (bridged pairs of workstation cards; peer access within each CPU socket only). That may
// leave a slow NCCL unjudged where its rings could avoid those pairs, but never judges a healthy one slow.
std::string link_comparison_line(const SweepRow& largest, int gpus, double p2p_one_way_GBps,
                                 bool every_pair_has_peer_access);

// "busbw 22.1 GB/s at 256 MiB is 6% of the 381.0 GB/s one way that the P2P copies of check 4 reached";
// "" when it is at least kLowBusBandwidthShare of it, or when there is nothing to compare (fewer than 2
// GPUs, a pair without peer access, no P2P figure: NaN, a size under kLinkComparisonMinBytes).
std::string low_bus_bandwidth(const SweepRow& largest, int gpus, double p2p_one_way_GBps,
                              bool every_pair_has_peer_access);

// Connections of NCCL's log that go through host memory (SHM) or the network (NET) between GPUs that have
// peer access both ways, one line per transport family: "NCCL uses SHM between GPU 0 and GPU 1, which
// have peer access: <why>", the why from nccl_peer_link_cause. NCCL's ranks are the GPUs' numbers here
// (check 5), or MPI ranks of one GPU each with `unit` "rank" (check 7: "between rank 0 and rank 1, whose
// GPUs have peer access"). A problem (the check WARNs) when a setting takes P2P away, or for NET, which
// one node should not need; a note when NCCL chose SHM by itself, as it does by default where the PCIe
// path between two GPUs crosses a CPU (P2P is often slower there): that is a healthy machine. And a problem
// for NET between the pairs without peer access that `judged_without_peer_access` names (those of one host
// whose peer access is known), whose path within a host is shared memory. advice() says what to do about
// the problems found.
struct PeerLinkFindings {
    std::vector<std::string> problems, notes;
    bool peer_links_unused = false;     // a problem between GPUs with peer access
    bool shared_memory_unused = false;  // NET between GPUs of one host without it
    std::string advice() const;
    void add(const PeerLinkFindings& more);  // another host's (check 7)
};
PeerLinkFindings transports_around_peer_access(const NcclLog& log, int gpus,
                                               const std::function<bool(int, int)>& peer_access,
                                               const Variables& variables, const std::string& unit = "GPU",
                                               const std::function<bool(int, int)>& judged_without_peer_access = {});

// What to do where transports_around_peer_access finds problems between GPUs with peer access, and where
// it finds NET between GPUs of one host without.
constexpr const char* kPeerLinksUnusedAdvice =
    "NCCL is not using the GPUs' peer links: unless you are diagnosing, unset the setting named (in the "
    "environment, NCCL_CONF_FILE, ~/.nccl.conf or /etc/nccl.conf); with none named, NCCL_DEBUG=INFO "
    "NCCL_DEBUG_SUBSYS=INIT,GRAPH shows why NCCL left P2P out";
constexpr const char* kSharedMemoryUnusedAdvice =
    "NCCL sends over the network between GPUs of one host that have no peer access, where shared memory is "
    "their path: unset NCCL_SHM_DISABLE (in the environment or an NCCL config file), and where it was set for a "
    "container's small /dev/shm, give the container more (--shm-size=8g or --ipc=host)";

// Whether NCCL_P2P_LEVEL=`level` keeps NCCL from P2P between some pair of this machine's GPUs that has peer
// access: LOC (or 0) any pair; NVL, NVB and C2C a pair without NVLink; PIX (or 1) a pair without NVLink
// whose PCIe path is more than one switch. A level at NCCL's default or above takes nothing away. True
// when check 2 did not learn the pairs' links (it may then).
bool p2p_level_limits_pairs(const std::string& level, const GpuSystem& system);
// Whether some pair of GPUs has peer access, which NCCL_P2P_DISABLE=1 would take away (true when check 2 did
// not learn it). Where none has (PCIe cards without P2P, most VMs), NCCL goes through host memory anyway.
bool some_pair_has_peer_access(const GpuSystem& system);

// Why NCCL would use `family` (SHM or NET) rather than P2P: the settings that take P2P away (and for NET,
// shared memory too) as NCCL's log reports them, else as doctor's environment has them (when the log was
// not captured): "NCCL_P2P_DISABLE=1 is set", naming a config file when the environment does not hold
// it. Without such a setting, a sentence on what else makes NCCL leave P2P out.
struct PeerLinkCause {
    std::string text;
    bool setting = false;  // a setting takes P2P away (else NCCL left it out by itself)
};
PeerLinkCause nccl_peer_link_cause(const std::string& family, const NcclLog& log, const Variables& variables);
// The settings nccl_peer_link_cause reads.
inline const std::vector<std::string> kPeerLinkSettings{"NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL", "NCCL_SHM_DISABLE"};

}  // namespace fwi::doctor
