#include "nccl_verdict.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "bandwidth.hpp"

namespace fwi::doctor {

namespace {

bool uses_family(const NcclLog& log, int from, int to, const std::string& family) {
    const auto found = log.transports.find({from, to});
    if (found == log.transports.end()) return false;
    return std::any_of(found->second.begin(), found->second.end(),
                       [&](const std::string& transport) { return transport_family(transport) == family; });
}

}  // namespace

std::vector<size_t> nccl_check_sizes(size_t largest) {
    std::vector<size_t> sizes;
    for (const size_t bytes : {kMiB, kNcclSummaryBytes, largest})
        if (bytes <= largest) sizes.push_back(bytes);
    std::sort(sizes.begin(), sizes.end());
    sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
    return sizes;
}

const SweepRow& nccl_summary_row(const std::vector<SweepRow>& rows) {
    const SweepRow* chosen = &rows.front();
    for (const SweepRow& row : rows)
        if (row.bytes <= kNcclSummaryBytes) chosen = &row;
    return *chosen;
}

std::vector<std::string> nccl_timing_lines(const std::vector<SweepRow>& rows, int gpus,
                                           const AllreduceSweepOptions& timing) {
    char line[160];
    std::snprintf(line, sizeof line,
                  "timed as nccl-tests does: after one checked call and up to %d warm-up calls, the median of %d "
                  "batches of %d back-to-back calls",
                  timing.warmup, timing.repeats, timing.iters);
    std::vector<std::string> lines{line,
                                   "(fewer where a batch would pass 1 GiB) between CUDA events on every GPU's stream, "
                                   "the slowest GPU's time per batch:"};
    std::snprintf(line, sizeof line, "%10s %12s %10s %12s %12s", "size", "calls/batch", "time(us)", "algbw(GB/s)",
                  "busbw(GB/s)");
    lines.push_back(line);
    for (const SweepRow& row : rows) {
        std::snprintf(line, sizeof line, "%6zu MiB %12d %10.1f %12.1f %12.1f", row.bytes / kMiB,
                      batch_iterations(row.bytes, timing.iters), row.seconds * 1e6,
                      algorithm_bandwidth(row.bytes, row.seconds) / 1e9,
                      bus_bandwidth(row.bytes, row.seconds, gpus) / 1e9);
        lines.push_back(line);
    }
    return lines;
}

namespace {
// Why check 5 cannot compare NCCL's bus bandwidth with check 4's P2P copies, or "" when it can.
std::string why_links_not_compared(int gpus, double p2p_one_way_GBps, bool every_pair_has_peer_access) {
    if (gpus < 2) return "one GPU, nothing to compare";
    if (!every_pair_has_peer_access)
        return "bus bandwidth not compared with check 4's P2P copies: some pairs of GPUs have no peer access (check "
               "2), so NCCL's rings may go through host memory between them";
    if (!(p2p_one_way_GBps > 0.0))
        return "no P2P figure to compare the bus bandwidth with (check 4 did not run, or found no pair with peer "
               "access)";
    return "";
}
}  // namespace

std::string link_comparison_line(const SweepRow& largest, int gpus, double p2p_one_way_GBps,
                                 bool every_pair_has_peer_access) {
    if (const std::string why = why_links_not_compared(gpus, p2p_one_way_GBps, every_pair_has_peer_access);
        !why.empty())
        return "links: " + why;
    const double busbw = bus_bandwidth(largest.bytes, largest.seconds, gpus) / 1e9;
    char text[240];
    std::snprintf(text, sizeof text,
                  "links: busbw %.1f GB/s at %zu MiB is %.0f%% of the %.1f GB/s one way of check 4's P2P copies (WARN "
                  "below %.0f%%, at %zu MiB or more)",
                  busbw, largest.bytes / kMiB, 100.0 * busbw / p2p_one_way_GBps, p2p_one_way_GBps,
                  100.0 * kLowBusBandwidthShare, kLinkComparisonMinBytes / kMiB);
    return text;
}

std::string low_bus_bandwidth(const SweepRow& largest, int gpus, double p2p_one_way_GBps,
                              bool every_pair_has_peer_access) {
    if (!why_links_not_compared(gpus, p2p_one_way_GBps, every_pair_has_peer_access).empty() ||
        largest.bytes < kLinkComparisonMinBytes || !(largest.seconds > 0.0))
        return "";
    const double busbw = bus_bandwidth(largest.bytes, largest.seconds, gpus) / 1e9;
    if (busbw >= kLowBusBandwidthShare * p2p_one_way_GBps) return "";
    char text[200];
    std::snprintf(
        text, sizeof text,
        "busbw %.1f GB/s at %zu MiB is %.0f%% of the %.1f GB/s one way that the P2P copies of check 4 reached", busbw,
        largest.bytes / kMiB, 100.0 * busbw / p2p_one_way_GBps, p2p_one_way_GBps);
    return text;
}

PeerLinkFindings transports_around_peer_access(const NcclLog& log, int gpus,
                                               const std::function<bool(int, int)>& peer_access,
                                               const Variables& variables, const std::string& unit,
                                               const std::function<bool(int, int)>& judged_without_peer_access) {
    constexpr size_t kPairsNamed = 3;
    const bool gpus_named = unit == "GPU";
    const auto both_ways = [&](int i, int j) { return peer_access(i, j) && peer_access(j, i); };
    // "NCCL uses SHM between GPU 0 and GPU 1, which have peer access: <cause>" (check 5); "... between rank 0
    // and rank 1, whose GPUs have peer access: <cause>" (check 7); several pairs named up to kPairsNamed.
    const auto line = [&](const std::string& family, const std::function<bool(int, int)>& judged, bool with_peers) {
        std::vector<std::string> pairs;
        for (int i = 0; i < gpus; ++i)
            for (int j = i + 1; j < gpus; ++j)
                if (judged(i, j) && (uses_family(log, i, j, family) || uses_family(log, j, i, family)))
                    pairs.push_back(unit + " " + std::to_string(i) + " and " + unit + " " + std::to_string(j));
        if (pairs.empty()) return std::string();
        const std::string have = with_peers ? "have peer access" : "have no peer access, on one host";
        std::string where;
        if (pairs.size() == 1) {
            where = pairs.front() + (gpus_named ? ", which " : ", whose GPUs ") + have;
        } else {
            const size_t more = pairs.size() > kPairsNamed ? pairs.size() - kPairsNamed : 0;
            pairs.resize(pairs.size() - more);
            where = std::to_string(pairs.size() + more) + " pairs of " +
                    (gpus_named ? "GPUs that " : "ranks whose GPUs ") + have + " (" + join(pairs, ", ") +
                    (more ? ", and " + std::to_string(more) + " more" : "") + ")";
        }
        return "NCCL uses " + family + " between " + where + ": " + nccl_peer_link_cause(family, log, variables).text;
    };
    PeerLinkFindings findings;
    for (const std::string family : {"SHM", "NET"}) {
        const std::string found = line(family, both_ways, true);
        if (found.empty()) continue;
        const bool problem = family == "NET" || nccl_peer_link_cause(family, log, variables).setting;
        (problem ? findings.problems : findings.notes).push_back(found);
        findings.peer_links_unused |= problem;
    }
    // Without peer access, shared memory is the path within one host: the network there (NCCL_SHM_DISABLE,
    // often left from a container's small /dev/shm) is as slow as between hosts.
    if (judged_without_peer_access) {
        const std::string found = line(
            "NET", [&](int i, int j) { return judged_without_peer_access(i, j) && !both_ways(i, j); }, false);
        if (!found.empty()) findings.problems.push_back(found);
        findings.shared_memory_unused |= !found.empty();
    }
    return findings;
}

std::string PeerLinkFindings::advice() const {
    std::vector<std::string> parts;
    if (peer_links_unused) parts.push_back(kPeerLinksUnusedAdvice);
    if (shared_memory_unused) parts.push_back(kSharedMemoryUnusedAdvice);
    return join(parts, "; and ");
}

void PeerLinkFindings::add(const PeerLinkFindings& more) {
    problems.insert(problems.end(), more.problems.begin(), more.problems.end());
    notes.insert(notes.end(), more.notes.begin(), more.notes.end());
    peer_links_unused |= more.peer_links_unused;
    shared_memory_unused |= more.shared_memory_unused;
}

bool p2p_level_limits_pairs(const std::string& level, const GpuSystem& system) {
    if (!p2p_level_below_default(level)) return false;
    const size_t pairs = size_t(system.count) * system.count;
    if (system.can_access.size() != pairs || system.links.size() != pairs) return true;
    const std::string name = p2p_level_name(level);
    for (int i = 0; i < system.count; ++i)
        for (int j = 0; j < system.count; ++j) {
            if (i == j || !system.peer(i, j)) continue;
            const Link& link = system.links[size_t(i) * system.count + j];
            if (name == "LOC") return true;
            if (link.nvlinks > 0) continue;       // every other level below the default allows NVLink
            if (name != "PIX") return true;       // NVL, NVB, C2C: NVLink only
            if (link.pcie != "PIX") return true;  // PIX: one PCIe switch
        }
    return false;
}

bool some_pair_has_peer_access(const GpuSystem& system) {
    if (system.can_access.size() != size_t(system.count) * system.count) return true;
    for (int i = 0; i < system.count; ++i)
        for (int j = 0; j < system.count; ++j)
            if (i != j && system.peer(i, j)) return true;
    return false;
}

PeerLinkCause nccl_peer_link_cause(const std::string& family, const NcclLog& log, const Variables& variables) {
    // The settings that take P2P away, and for the network transport also shared memory, with the values
    // that do so.
    struct Blocking {
        const char* name;
        bool (*blocks)(const std::string& value);
    };
    std::vector<Blocking> blocking{{"NCCL_P2P_DISABLE", nccl_disable_set}, {"NCCL_P2P_LEVEL", p2p_level_below_default}};
    if (family == "NET") blocking.push_back({"NCCL_SHM_DISABLE", nccl_disable_set});

    std::vector<std::string> found, from_files;
    for (const Blocking& setting : blocking) {
        const auto logged = log.settings.find(setting.name);
        const bool in_environment = is_set(variables, setting.name);
        if (logged == log.settings.end() && !in_environment) continue;
        const std::string value = logged != log.settings.end() ? logged->second : value_of(variables, setting.name);
        if (!setting.blocks(value)) continue;
        found.push_back(std::string(setting.name) + "=" + value);
        if (!in_environment) from_files.push_back(setting.name);
    }
    if (found.empty())
        return {family == "SHM" ? "no NCCL setting explains it, so NCCL ruled P2P out itself (as it does by default "
                                  "where the PCIe path between two GPUs goes through a CPU); NCCL_DEBUG=INFO "
                                  "NCCL_DEBUG_SUBSYS=INIT,GRAPH shows its reasons"
                                : "no NCCL setting explains it; NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH shows why "
                                  "NCCL chose its network transport"};
    const std::string files = "an NCCL config file (NCCL_CONF_FILE, ~/.nccl.conf or /etc/nccl.conf)";
    std::string cause = join(found, " and ") + (found.size() == 1 ? " is set" : " are set");
    if (from_files.size() == found.size())
        cause += " in " + files;
    else if (!from_files.empty())
        cause += ", " + join(from_files, " and ") + " in " + files;
    return {cause, true};
}

}  // namespace fwi::doctor
