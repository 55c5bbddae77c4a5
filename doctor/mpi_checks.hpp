// Check 7, under mpirun with --mpi: which GPU each rank drives (host and PCI bus id, gathered from every
// rank), two ranks on one GPU (FAIL), check 6 on the hosts other than rank 0's, whether MPI is CUDA-aware,
// and an allreduce through NCCL bootstrapped over MPI, waited on with the deadline. Collective: every rank
// calls it; rank 0's finding describes all ranks.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include "host.hpp"
#include "nccl_log.hpp"
#include "nccl_verdict.hpp"
#include "report.hpp"
#include "watchdog.hpp"

namespace fwi::doctor {

struct MpiCheckOptions {
    size_t nccl_bytes = size_t(32) << 20;
    Injection injection;
};

Finding check_mpi(const MpiCheckOptions& options, const Deadline& deadline);

// One rank's line in the mapping table, and the finding rank 0 builds from all of them. Plain data so
// that it travels through MPI_Allgather / MPI_Gather as bytes (and can be tested without MPI).
struct RankRecord {
    char host[256] = {};             // whole: host names differing only past byte 63 (long FQDNs) are other hosts
    char bus_id[32] = {};            // "" when the rank has no GPU
    char visible_devices[512] = {};  // CUDA_VISIBLE_DEVICES, "(unset)" when unset: 8 GPU or MIG UUIDs fit
    int local_rank = 0;
    int visible_gpus = 0;
    int device = -1;
    char nccl_version[16] = {};  // of the library this rank loaded: "2.28.3"
    int driver_version = 0;      // cudaDriverGetVersion's: 13000
    // Its NCCL_* variables, sorted, one per line ("NCCL_IB_HCA=mlx5_0\nNCCL_SOCKET_IFNAME=ib0\n"): whole ones only,
    // as many as fit (set_nccl_settings; control characters escaped), and how many did not. And the names of
    // all of them, so that one whose value did not fit is not taken for unset.
    char nccl_settings[2048] = {};
    int nccl_settings_left_out = 0;
    char nccl_setting_names[1024] = {};
    int nccl_setting_names_left_out = 0;
    int infiniband_devices = 0;   // 1 where its host has InfiniBand (or RoCE) devices
    char no_gpu_cause[512] = {};  // where it sees no GPU: why, as check 1 diagnoses it ("" otherwise)
    char gpu_error[512] = {};     // where it sees GPUs but could not take one (exclusive-process mode): why
    // Check 6's shared memory and limits (check_host_memory_and_limits), run by the first rank of each host but
    // rank 0's, whose own check 6 doctor reports: its Status as an int, -1 where not run; its summary and
    // advice, cut to fit.
    int host_check = -1;
    char host_check_summary[512] = {};
    char host_check_next[384] = {};
    unsigned pid = 0;  // the rank's process: doctor's ranks on a host are not other processes on its GPUs
    // Check 1's health checks of the rank's GPU (check_gpu_health), run by every rank but rank 0 once it has
    // its GPU, for rank 0 to report those its own check 1 did not examine: the Status as an int, -1 where not
    // run; the summary and advice, cut to fit.
    int gpu_check = -1;
    char gpu_check_summary[768] = {};
    char gpu_check_next[768] = {};
};
// Gathered over MPI as bytes.
static_assert(std::is_trivially_copyable_v<RankRecord>);

// Puts `settings` ("NAME=value", any order) into the record: sorted, whole entries while they fit.
void set_nccl_settings(RankRecord& record, std::vector<std::string> settings);

struct RankOutcome {
    long long wrong = -1;  // wrong result elements; -1 when the allreduce did not complete
    double seconds = 0.0;  // median time of one allreduce (host clock)
    char error[640] = {};  // why it did not complete (NCCL's error and its last warning)
    // NCCL's connections from this rank's log, "from to transport" a line ("0 1 NET/IB/GDRDMA", transport_without_nic),
    // whole lines while they fit (set_connections); log_captured 0 where the user's NCCL_DEBUG kept doctor from reading
    // it.
    char connections[1536] = {};
    int connections_left_out = 0;
    int log_captured = 0;
    // Those of kPeerLinkSettings that NCCL's log says it read, "NAME=value" a line: from the environment or
    // from an NCCL config file, which only the log shows.
    char nccl_log_settings[512] = {};
    // The other ranks on its host whose GPU has peer access with this rank's, both ways, as "1 3" (NVML's view,
    // which CUDA_VISIBLE_DEVICES does not narrow); where NVML cannot say, peers_known is 0 and peers_unknown why.
    char peer_ranks[512] = {};
    int peers_known = 0;
    char peers_unknown[160] = {};
    // Where the allreduce failed: NCCL's WARN lines from this rank's log (warning_lines), whole lines while
    // they fit. A timeout's error has none of NCCL's words; these often say what NCCL was doing.
    char nccl_warnings[1024] = {};
};

// Fills the outcome's connections and logged settings from this rank's NCCL log.
void set_connections(RankOutcome& outcome, const NcclLog& log);
// Fills the outcome's nccl_warnings from this rank's NCCL log.
void set_nccl_warnings(RankOutcome& outcome, const NcclLog& log);
// The failed ranks' NCCL warnings, "rank r: NCCL WARN ..." a line, for at most 4 ranks, then a count of the rest.
std::vector<std::string> nccl_warning_lines(const std::vector<RankOutcome>& outcomes);
// Every rank's connections as one log (only its transports filled).
NcclLog merged_connections(const std::vector<RankOutcome>& outcomes);

// Fills the outcome's peer ranks: those on `rank`'s host (records) whose GPU `peer_access` says has peer access
// with `rank`'s GPU, given the two PCI bus ids; what it throws goes into peers_unknown.
void set_peer_ranks(RankOutcome& outcome, const std::vector<RankRecord>& records, int rank,
                    const std::function<bool(const std::string&, const std::string&)>& peer_access);

// Check 7's verdict on ranks of one host whose GPUs have peer access (as both ranks' peer_ranks say) but that
// NCCL connects through host memory or the network, and on those without that it connects over the network
// (connections: merged_connections), as check 5 judges the GPUs of one process (transports_around_peer_access), host by
// host: the cause from the NCCL_* variables of the host's first rank (records) and the settings its ranks' NCCL logs
// report (outcomes).
PeerLinkFindings peer_link_verdict(const std::vector<RankRecord>& records, const std::vector<RankOutcome>& outcomes,
                                   const NcclLog& connections);

// Check 7's verdict on how ranks on different hosts connect (records: the ranks' hosts; log:
// merged_connections): WARN where a pair crosses hosts over TCP sockets (NET/Socket) while both hosts have
// InfiniBand devices, which NCCL then does not use; else PASS, with a detail line where pairs cross hosts over
// sockets (NCCL's slowest transport) or over InfiniBand, and one where only one host of such a pair has
// InfiniBand devices (sockets are then all NCCL can use).
Finding network_verdict(const std::vector<RankRecord>& records, const NcclLog& log);

// What to try when NCCL over MPI failed: where a rank's error names the cause (no network interface, or
// /dev/shm), that cause's (nccl_failure_advice); else on one host, the advice of check 5 (P2P first); across hosts,
// the network NCCL's bootstrap and transport cross (the interface, the ports, InfiniBand).
std::string nccl_over_mpi_advice(const std::vector<RankRecord>& records, const std::vector<RankOutcome>& outcomes);

// What differs between the ranks: the NCCL library, the CUDA driver, each NCCL_* variable, one line each, as
// "NCCL_SOCKET_IFNAME: ib0 on ranks 0, 1; unset on ranks 2, 3"; empty when the ranks agree. A library, a
// driver or a variable that some ranks lack should not differ (an mpirun that does not hand an exported
// variable to the ranks on other hosts: Open MPI needs -x); a variable that every rank sets, to different
// values, may be meant so (each host's own interface name): may_be_intended.
struct RankDifference {
    std::string line;
    bool may_be_intended = false;
};
std::vector<RankDifference> rank_differences(const std::vector<RankRecord>& records);

// The advice for `differences` (not empty): to give every rank the same where one should not differ, else to
// check that the different values are meant.
std::string rank_differences_advice(const std::vector<RankDifference>& differences);

// Check 7's account of check 6 on the hosts other than rank 0's (records: host_check of each host's first
// rank): a detail line per host that WARNs or FAILs, with its advice, and one naming those that pass; status
// WARN, with the first such host's summary, where any does. Empty, PASS, on one host.
Finding other_hosts_verdict(const std::vector<RankRecord>& records);

// Ranks that share a GPU (same host, same PCI bus id), as "ranks 0 and 2 on host-a 0000:18:00.0".
std::vector<std::string> shared_gpus(const std::vector<RankRecord>& records);
// The ranks whose GPUs check 1 (run by rank 0 alone) did not examine: on another host than rank 0's, or on
// its host but hidden from rank 0 (a CUDA_VISIBLE_DEVICES per rank). `seen`: the PCI bus ids of the GPUs
// rank 0 sees.
std::vector<int> ranks_check_1_did_not_see(const std::vector<RankRecord>& records,
                                           const std::vector<std::string>& seen);
// Check 1's health checks of those ranks' GPUs, as each rank ran them on its own (RankRecord::gpu_check):
// a line for each one that did not pass (the first few), and one naming those that did; WARN where one
// warned or failed (the first one's summary, and its advice on its host), PASS otherwise.
Finding unseen_gpus_verdict(const std::vector<RankRecord>& records, const std::vector<std::string>& seen);
std::vector<std::string> mapping_lines(const std::vector<RankRecord>& records,
                                       const std::vector<RankOutcome>& outcomes);

}  // namespace fwi::doctor
