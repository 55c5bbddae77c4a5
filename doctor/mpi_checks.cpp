#include "mpi_checks.hpp"

#include <mpi.h>
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>  // Open MPI's MPIX_CUDA_AWARE_SUPPORT and MPIX_Query_cuda_support
#endif

#include <unistd.h>  // environ

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <utility>

#include "bandwidth.hpp"
#include "cuda_check.hpp"
#include "device.hpp"
#include "errors.hpp"
#include "gpu_checks.hpp"
#include "mpi_check.hpp"
#include "mpi_env.hpp"
#include "nccl_allreduce.hpp"
#include "nccl_comm.hpp"
#include "nccl_mpi.hpp"
#include "nvml.hpp"
#include "output.hpp"
#include "run_env.hpp"
#include "timing.hpp"

namespace fwi::doctor {

namespace {

// `text` into `target`, cut short with "..." where it does not fit.
template <size_t N>
void copy_text(char (&target)[N], const std::string& text) {
    static_assert(N > 3, "room for the ... at least");
    const std::string kept = text.size() < N ? text : text.substr(0, N - 4) + "...";
    std::memcpy(target, kept.c_str(), kept.size() + 1);
}

RankRecord this_rank(int visible_gpus) {
    RankRecord record;
    copy_text(record.host, host_name());
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    copy_text(record.visible_devices, visible ? visible : "(unset)");
    record.local_rank = node_local_rank(MPI_COMM_WORLD).rank;
    record.visible_gpus = visible_gpus;
    copy_text(record.nccl_version, nccl_version_number());
    cudaDriverGetVersion(&record.driver_version);
    std::vector<std::string> settings;
    for (char** entry = environ; *entry; ++entry)
        if (std::strncmp(*entry, "NCCL_", 5) == 0) settings.push_back(*entry);
    set_nccl_settings(record, settings);
    record.infiniband_devices = has_infiniband_devices();
    record.pid = static_cast<unsigned>(getpid());
    if (visible_gpus == 0) {  // check 1's diagnosis: no driver, one older than the runtime, no device nodes, ...
        const Finding why = diagnose_no_gpu_here(relevant_variables_in_effect(), Nvml());
        copy_text(record.no_gpu_cause, why.summary + "; try: " + why.next);
    }
    // Rank 0 is the first rank of its host, whose check 6 doctor runs and reports as its own.
    if (record.local_rank == 0 && world_rank() != 0) {
        const Finding host = check_host_memory_and_limits();
        record.host_check = int(host.status);
        copy_text(record.host_check_summary, host.summary);
        copy_text(record.host_check_next, host.next);
    }
    return record;
}

// Check 1's health checks of this rank's GPU, into its record, for rank 0 to report where its own check 1
// did not see the GPU. `before`: every rank's record, for the processes of doctor's ranks on this host.
void examine_own_gpu(RankRecord& mine, const std::vector<RankRecord>& before) {
    std::vector<unsigned> own_processes;
    for (const RankRecord& record : before)
        if (std::strcmp(record.host, mine.host) == 0) own_processes.push_back(record.pid);
    try {
        const Finding health = check_gpu_health(Nvml(), mine.device, own_processes);
        mine.gpu_check = int(health.status);
        copy_text(mine.gpu_check_summary, health.summary);
        copy_text(mine.gpu_check_next, health.next);
    } catch (const std::exception& error) {  // what it could not read is no reason to stop the check
        mine.gpu_check = int(Status::skip);
        copy_text(mine.gpu_check_summary, std::string("not examined: ") + error.what());
    }
}

template <typename T>
std::vector<T> all_gather(const T& mine) {
    std::vector<T> all(world_size());
    MPI_CHECK(MPI_Allgather(&mine, sizeof(T), MPI_BYTE, all.data(), sizeof(T), MPI_BYTE, MPI_COMM_WORLD));
    return all;
}

std::string cuda_aware_mpi() {
#if defined(MPIX_CUDA_AWARE_SUPPORT)
    const bool built = MPIX_CUDA_AWARE_SUPPORT;
    const bool at_run_time = MPIX_Query_cuda_support() == 1;
    return std::string("built ") + (built ? "with" : "without") + " CUDA support, " +
           (at_run_time ? "CUDA-aware at run time" : "not CUDA-aware at run time") +
           (at_run_time ? "" : " (device pointers must be staged through host memory, as 03 does, or go through NCCL)");
#else
    return "unknown: this MPI has no MPIX_Query_cuda_support (Open MPI's mpi-ext.h)";
#endif
}

// The allreduce through NCCL bootstrapped over MPI, on this rank's GPU. Never throws: what went wrong
// goes into the outcome, so that every rank reaches the collectives that follow.
RankOutcome nccl_over_mpi(int device, const MpiCheckOptions& options, const Deadline& deadline) {
    // Before the first NCCL call of the process: under --mpi no other check makes a communicator.
    const NcclLogCapture capture;
    RankOutcome outcome;
    const int rank = world_rank(), ranks = world_size();
    const auto note = [&](const std::exception& error) {
        const std::string message = error.what();
        copy_text(outcome.error, message.substr(0, message.find(" Hint: ")));
    };
    ncclComm_t comm = nullptr;  // null once aborted or destroyed
    std::unique_ptr<RankBuffers> buffers;
    CudaStream stream;
    const auto allreduce = [&] {
        buffers->allreduce(comm, stream.get());
        try {
            wait_for_nccl({comm}, {stream.get()}, "NCCL allreduce over MPI", deadline.remaining());
        } catch (...) {
            comm = nullptr;  // wait_for_nccl aborted it
            throw;
        }
    };
    try {
        comm = nccl_bootstrap_over_mpi(MPI_COMM_WORLD, backstop_seconds(deadline), deadline.remaining());
        buffers = std::make_unique<RankBuffers>(device, rank, options.nccl_bytes / sizeof(float));
        stream = CudaStream(device);
        allreduce();  // the first call also pays NCCL's one-time costs
        outcome.wrong = buffers->count_wrong(ranks);
    } catch (const std::exception& error) {
        note(error);
    }
    // Time it only when every rank has the right sum: a rank that has not may leave the others waiting.
    int all_correct = outcome.wrong == 0;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &all_correct, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    try {
        if (all_correct) {
            std::vector<double> seconds;
            for (int repetition = 0; repetition < 5; ++repetition) {
                if (options.injection.hang_nccl && rank == 0)
                    throw EnvironmentError("rank 0 left its allreduce out (FWI_DOCTOR_INJECT=hang-nccl)");
                const HostTimer timer;
                allreduce();
                seconds.push_back(timer.seconds());
            }
            outcome.seconds = median(seconds);
            nccl_destroy_all({std::exchange(comm, nullptr)}, deadline.remaining());
        }
    } catch (const std::exception& error) {
        note(error);
    }
    // The peers may still wait for this rank: abort, never finalize.
    if (comm) nccl_abort(comm, backstop_seconds(deadline));
    outcome.log_captured = capture.capturing();
    const NcclLog log = capture.read();
    set_connections(outcome, log);
    if (outcome.error[0]) set_nccl_warnings(outcome, log);
    return outcome;
}

}  // namespace

Finding other_hosts_verdict(const std::vector<RankRecord>& records) {
    Finding verdict;
    std::vector<std::string> passed, warned;
    for (size_t r = 0; r < records.size(); ++r) {
        const RankRecord& record = records[r];
        if (record.host_check < 0) continue;  // not the first rank of a host other than rank 0's
        const std::string host = std::string(record.host) + " (rank " + std::to_string(r) + ")";
        if (Status(record.host_check) == Status::pass) {
            passed.push_back(host);
            continue;
        }
        warned.push_back(record.host);
        verdict.details.push_back("check 6 on " + host + ": " + status_name(Status(record.host_check)) + "  " +
                                  record.host_check_summary +
                                  (record.host_check_next[0] ? std::string("; try: ") + record.host_check_next : ""));
        if (verdict.status == Status::pass) {
            verdict.status = Status::warn;
            verdict.summary = "check 6 on host " + std::string(record.host) + ": " + record.host_check_summary;
            if (record.host_check_next[0])
                verdict.next = "on host " + std::string(record.host) + ": " + record.host_check_next;
        }
    }
    if (!passed.empty())
        verdict.details.push_back("check 6 (shared memory, limits) on the other hosts: PASS on " + join(passed, ", "));
    if (warned.size() > 1)
        verdict.summary += " (and " + std::to_string(warned.size() - 1) +
                           (warned.size() > 2 ? " more hosts" : " more host") + " below)";
    return verdict;
}

std::vector<std::string> shared_gpus(const std::vector<RankRecord>& records) {
    std::vector<std::string> shared;
    std::vector<bool> reported(records.size(), false);
    for (size_t r = 0; r < records.size(); ++r) {
        if (reported[r] || records[r].bus_id[0] == '\0') continue;
        std::string ranks = std::to_string(r);
        int sharing = 1;
        for (size_t q = r + 1; q < records.size(); ++q)
            if (std::strcmp(records[q].host, records[r].host) == 0 &&
                std::strcmp(records[q].bus_id, records[r].bus_id) == 0) {
                ranks += " and " + std::to_string(q);
                reported[q] = true;
                ++sharing;
            }
        if (sharing > 1)
            shared.push_back("ranks " + ranks + " on " + records[r].host + " share GPU " + records[r].bus_id);
    }
    return shared;
}

std::vector<int> ranks_check_1_did_not_see(const std::vector<RankRecord>& records,
                                           const std::vector<std::string>& seen) {
    std::vector<int> unseen;
    for (size_t r = 0; r < records.size(); ++r) {
        const RankRecord& record = records[r];
        if (record.bus_id[0] == '\0') continue;  // no GPU taken: said elsewhere
        const bool on_rank0_host = std::strcmp(record.host, records[0].host) == 0;
        if (on_rank0_host && std::find(seen.begin(), seen.end(), record.bus_id) != seen.end()) continue;
        unseen.push_back(int(r));
    }
    return unseen;
}

Finding unseen_gpus_verdict(const std::vector<RankRecord>& records, const std::vector<std::string>& seen) {
    // Named up to a few at a time: a large job's lists would bury the rest of the finding.
    constexpr size_t kNamed = 4;
    const auto named = [](std::vector<std::string> gpus) {
        if (gpus.size() > kNamed) {
            const size_t more = gpus.size() - kNamed;
            gpus.resize(kNamed);
            gpus.push_back("and " + std::to_string(more) + " more");
        }
        return join(gpus, ", ");
    };
    Finding verdict;
    std::vector<std::string> passed, not_examined;
    int warned = 0, lines = 0, lines_left_out = 0;
    for (const int r : ranks_check_1_did_not_see(records, seen)) {
        const RankRecord& record = records[r];
        // Its own ordinal, which its findings name it by ("clocks lowered by GPU 0").
        const std::string gpu = "rank " + std::to_string(r) + "'s GPU " + std::to_string(record.device) + " (" +
                                record.host + " " + record.bus_id + ")";
        if (record.gpu_check < 0) {  // not run there (a defence: every rank but 0 runs it once it has its GPU)
            not_examined.push_back(gpu);
            continue;
        }
        const Status status = Status(record.gpu_check);
        if (status == Status::pass) {
            passed.push_back(gpu);
            continue;
        }
        const std::string next = record.gpu_check_next;
        if (lines++ < int(kNamed))
            verdict.details.push_back("check 1 on " + gpu + ": " + status_name(status) + "  " +
                                      record.gpu_check_summary + (next.empty() ? "" : "; try: " + next));
        else
            ++lines_left_out;
        if (status == Status::skip || warned++ > 0) continue;  // a SKIP is said in its line
        verdict.status = Status::warn;
        verdict.summary = "check 1 on " + gpu + ": " + record.gpu_check_summary;
        if (!next.empty()) verdict.next = "on host " + std::string(record.host) + ": " + next;
    }
    if (warned > 1) verdict.summary += " (and " + count_of(warned - 1, "more GPU") + " below)";
    if (lines_left_out > 0)
        verdict.details.push_back("and " + count_of(lines_left_out, "more GPU") +
                                  " that did not pass (each rank's gpu_check in the JSON's mapping)");
    const std::string what = "check 1 (clocks, power limit, other processes) on the GPUs rank 0 does not see";
    if (!passed.empty()) verdict.details.push_back(what + ": PASS on " + named(passed));
    if (!not_examined.empty())
        verdict.details.push_back("check 1 did not examine " + named(not_examined) +
                                  ": for their links, clocks and other processes, run doctor (without --mpi) on "
                                  "their hosts, with their ranks' CUDA_VISIBLE_DEVICES");
    return verdict;
}

namespace {
// `lines` into `target`, one per line, whole ones only while they fit; returns how many did not.
template <size_t N>
int pack_whole_lines(char (&target)[N], const std::vector<std::string>& lines) {
    std::string packed;
    int left_out = 0;
    for (const std::string& line : lines) {
        if (packed.size() + line.size() + 1 < N)
            packed += line + "\n";
        else
            ++left_out;
    }
    copy_text(target, packed);
    return left_out;
}
}  // namespace

void set_nccl_settings(RankRecord& record, std::vector<std::string> settings) {
    std::vector<std::string> names;
    for (std::string& setting : settings) {
        setting = shown_path(setting);  // whole, control characters escaped: a newline would read as another line
        names.push_back(setting.substr(0, setting.find('=')));
    }
    std::sort(settings.begin(), settings.end());
    std::sort(names.begin(), names.end());
    record.nccl_settings_left_out = pack_whole_lines(record.nccl_settings, settings);
    record.nccl_setting_names_left_out = pack_whole_lines(record.nccl_setting_names, names);
}

void set_connections(RankOutcome& outcome, const NcclLog& log) {
    std::vector<std::string> lines;
    for (const auto& [pair, transports] : log.transports) {
        std::set<std::string> kinds;  // NET/IB/GDRDMA once, not once per NIC
        for (const std::string& transport : transports) kinds.insert(transport_without_nic(transport));
        for (const std::string& kind : kinds)
            lines.push_back(std::to_string(pair.first) + " " + std::to_string(pair.second) + " " + kind);
    }
    outcome.connections_left_out = pack_whole_lines(outcome.connections, lines);
    std::vector<std::string> settings;  // those that take peer links away only: they fit
    for (const auto& [name, value] : log.settings)
        if (std::find(kPeerLinkSettings.begin(), kPeerLinkSettings.end(), name) != kPeerLinkSettings.end())
            settings.push_back(shown_path(name + "=" + value));
    pack_whole_lines(outcome.nccl_log_settings, settings);
}

void set_nccl_warnings(RankOutcome& outcome, const NcclLog& log) {
    pack_whole_lines(outcome.nccl_warnings, warning_lines(log));
}

std::vector<std::string> nccl_warning_lines(const std::vector<RankOutcome>& outcomes) {
    constexpr int kMostRanks = 4;
    std::vector<std::string> lines;
    int ranks_shown = 0, ranks_left_out = 0;
    for (size_t r = 0; r < outcomes.size(); ++r) {
        if (!outcomes[r].nccl_warnings[0]) continue;
        if (ranks_shown == kMostRanks) {
            ++ranks_left_out;
            continue;
        }
        ++ranks_shown;
        std::istringstream warnings(outcomes[r].nccl_warnings);
        for (std::string line; std::getline(warnings, line);)
            lines.push_back("rank " + std::to_string(r) + ": " + line);
    }
    if (ranks_left_out > 0) lines.push_back("and " + count_of(ranks_left_out, "more rank") + " with NCCL warnings");
    return lines;
}

NcclLog merged_connections(const std::vector<RankOutcome>& outcomes) {
    NcclLog merged;
    for (const RankOutcome& outcome : outcomes) {
        std::istringstream lines(outcome.connections);
        int from = 0, to = 0;
        for (std::string transport; lines >> from >> to >> transport;) merged.transports[{from, to}].insert(transport);
    }
    return merged;
}

namespace {
// "NAME=value" lines (RankRecord::nccl_settings, RankOutcome::nccl_log_settings) as name-value pairs.
Variables settings_of(const char* lines) {
    Variables settings;
    std::istringstream text(lines);
    for (std::string line; std::getline(text, line);)
        if (const size_t equals = line.find('='); equals != std::string::npos)
            settings.emplace_back(line.substr(0, equals), line.substr(equals + 1));
    return settings;
}
}  // namespace

void set_peer_ranks(RankOutcome& outcome, const std::vector<RankRecord>& records, int rank,
                    const std::function<bool(const std::string&, const std::string&)>& peer_access) {
    outcome.peers_known = 0;
    outcome.peer_ranks[0] = outcome.peers_unknown[0] = '\0';
    std::string peers;
    try {
        for (int other = 0; other < int(records.size()); ++other)
            if (other != rank && std::strcmp(records[other].host, records[rank].host) == 0 &&
                std::strcmp(records[other].bus_id, records[rank].bus_id) != 0 &&
                peer_access(records[rank].bus_id, records[other].bus_id))
                peers += (peers.empty() ? "" : " ") + std::to_string(other);
    } catch (const std::exception& error) {
        copy_text(outcome.peers_unknown, error.what());
        return;
    }
    if (peers.size() >= sizeof outcome.peer_ranks) {  // more ranks on one host than anyone runs
        copy_text(outcome.peers_unknown,
                  "more peer ranks than fit in " + std::to_string(sizeof outcome.peer_ranks) + " bytes");
        return;
    }
    copy_text(outcome.peer_ranks, peers);
    outcome.peers_known = 1;
}

PeerLinkFindings peer_link_verdict(const std::vector<RankRecord>& records, const std::vector<RankOutcome>& outcomes,
                                   const NcclLog& connections) {
    const int ranks = int(outcomes.size());
    const auto lists = [&](int rank, int other) {
        std::istringstream peers(outcomes[rank].peer_ranks);
        for (int peer = 0; peers >> peer;)
            if (peer == other) return true;
        return false;
    };
    PeerLinkFindings findings;
    std::set<std::string> judged;
    for (int first = 0; first < ranks; ++first) {  // host by host, each with its own settings
        const std::string host = records[first].host;
        if (!judged.insert(host).second) continue;
        const auto on_host = [&](int rank) { return host == records[rank].host; };
        NcclLog log;
        log.transports = connections.transports;
        for (int rank = 0; rank < ranks; ++rank)
            if (on_host(rank))
                for (const auto& [name, value] : settings_of(outcomes[rank].nccl_log_settings))
                    log.settings.emplace(name, value);
        const auto known_on_host = [&](int i, int j) {
            return on_host(i) && on_host(j) && outcomes[i].peers_known && outcomes[j].peers_known;
        };
        const auto peer_access = [&](int i, int j) { return known_on_host(i, j) && lists(i, j) && lists(j, i); };
        findings.add(transports_around_peer_access(log, ranks, peer_access, settings_of(records[first].nccl_settings),
                                                   "rank", known_on_host));
    }
    return findings;
}

Finding network_verdict(const std::vector<RankRecord>& records, const NcclLog& log) {
    // A pair of hosts over sockets is a problem only where both show InfiniBand devices: with one side
    // without (a container not given /dev/infiniband, a host without an HCA) sockets are all NCCL can use.
    Finding verdict;
    std::set<std::string> socket_pairs, infiniband_pairs, unused_infiniband, one_sided;
    for (const auto& [pair, transports] : log.transports) {
        const auto [from, to] = pair;
        if (from < 0 || to < 0 || size_t(from) >= records.size() || size_t(to) >= records.size()) continue;
        const RankRecord &a = records[from], &b = records[to];
        if (std::strcmp(a.host, b.host) == 0) continue;
        const std::string hosts = std::min<std::string>(a.host, b.host) + " - " + std::max<std::string>(a.host, b.host);
        for (const std::string& transport : transports) {
            if (transport.rfind("NET/Socket", 0) == 0) {
                socket_pairs.insert(hosts);
                if (a.infiniband_devices && b.infiniband_devices)
                    unused_infiniband.insert(hosts);
                else if (a.infiniband_devices || b.infiniband_devices)
                    one_sided.insert(std::string(a.infiniband_devices ? b.host : a.host) + " (its pair " +
                                     (a.infiniband_devices ? a.host : b.host) + " has some)");
            } else if (transport.rfind("NET/IB", 0) == 0) {
                infiniband_pairs.insert(hosts);
            }
        }
    }
    const auto list = [](const std::set<std::string>& items) {
        return join(std::vector<std::string>(items.begin(), items.end()), ", ");
    };
    if (!infiniband_pairs.empty())
        verdict.details.push_back("across hosts over InfiniBand (NET/IB): " + list(infiniband_pairs));
    if (!socket_pairs.empty())
        verdict.details.push_back("across hosts over TCP sockets (NET/Socket, NCCL's slowest transport): " +
                                  list(socket_pairs));
    if (!one_sided.empty())
        verdict.details.push_back(
            "no InfiniBand device seen on " + list(one_sided) +
            ": sockets are all NCCL can use between them (in a container, pass /dev/infiniband to it)");
    if (unused_infiniband.empty()) return verdict;
    verdict.status = Status::warn;
    verdict.summary = "hosts that both have InfiniBand devices connect over TCP sockets: " + list(unused_infiniband);
    verdict.next =
        "check NCCL_IB_DISABLE, NCCL_IB_HCA and NCCL_NET on every rank, that libibverbs (rdma-core) is installed in "
        "the job's environment and the ports are Active (`ibstat`); in a container, that it was given the devices "
        "(`ls /dev/infiniband` lists uverbs0 and up; the host's HCAs show in /sys even without them); on a network "
        "that needs NCCL's net plugin "
        "(AWS EFA: aws-ofi-nccl), that NCCL_NET_PLUGIN finds it; NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET says "
        "why NCCL left IB out";
    return verdict;
}

std::vector<RankDifference> rank_differences(const std::vector<RankRecord>& records) {
    // One line for a property whose value (value_of(rank); nullopt: unknown, the rank left out) differs: each
    // value with the ranks that have it.
    const auto differing = [&](const std::string& what, const auto& value_of) {
        std::vector<std::pair<std::string, std::vector<std::string>>> values;  // each value, its ranks
        for (size_t r = 0; r < records.size(); ++r) {
            const std::optional<std::string> known = value_of(r);
            if (!known) continue;
            const std::string& value = *known;
            auto same =
                std::find_if(values.begin(), values.end(), [&](const auto& seen) { return seen.first == value; });
            if (same == values.end()) same = values.insert(values.end(), {value, {}});
            same->second.push_back(std::to_string(r));
        }
        RankDifference difference;
        if (values.size() < 2) return difference;
        std::vector<std::string> parts;
        for (const auto& [value, ranks] : values)
            parts.push_back(value + " on rank" + (ranks.size() > 1 ? "s " : " ") + join(ranks, ", "));
        difference.line = what + ": " + join(parts, "; ");
        return difference;
    };
    // Each rank's NCCL_* variables, name -> value, the names it sets (also those whose value did not fit), and
    // every name any rank has.
    std::vector<std::map<std::string, std::string>> settings(records.size());
    std::vector<std::set<std::string>> names_set(records.size());
    std::set<std::string> names;
    for (size_t r = 0; r < records.size(); ++r) {
        std::stringstream list(records[r].nccl_settings);
        for (std::string setting; std::getline(list, setting);) {
            const size_t equals = setting.find('=');
            settings[r][setting.substr(0, equals)] = equals == std::string::npos ? "" : setting.substr(equals + 1);
            names.insert(setting.substr(0, equals));
        }
        std::stringstream name_list(records[r].nccl_setting_names);
        for (std::string name; std::getline(name_list, name);) {
            names_set[r].insert(name);
            names.insert(name);
        }
    }
    std::vector<RankDifference> differences;
    differences.push_back(
        differing("NCCL", [&](size_t r) { return std::optional<std::string>(records[r].nccl_version); }));
    differences.push_back(differing("CUDA driver", [&](size_t r) {
        return std::optional<std::string>(cuda_version_text(records[r].driver_version));
    }));
    for (const std::string& name : names) {
        // Unset on a rank: in neither of its lists, where all its names fit.
        const auto unset_on = [&](size_t r) {
            return !settings[r].count(name) && !names_set[r].count(name) && records[r].nccl_setting_names_left_out == 0;
        };
        bool unset_somewhere = false;
        for (size_t r = 0; r < records.size(); ++r) unset_somewhere = unset_somewhere || unset_on(r);
        differences.push_back(differing(name, [&](size_t r) -> std::optional<std::string> {
            const auto set = settings[r].find(name);
            if (set != settings[r].end()) return set->second;
            if (unset_on(r)) return "unset";
            // Set, but its value did not fit (or perhaps set, where even the names did not all fit): its value
            // cannot be compared, but set against unset is a difference all the same.
            if (names_set[r].count(name) && unset_somewhere) return "set (value not compared)";
            return std::nullopt;
        }));
        differences.back().may_be_intended = !unset_somewhere;
    }
    differences.erase(std::remove_if(differences.begin(), differences.end(),
                                     [](const RankDifference& difference) { return difference.line.empty(); }),
                      differences.end());
    return differences;
}

std::string rank_differences_advice(const std::vector<RankDifference>& differences) {
    const bool all_may_be_intended =
        std::all_of(differences.begin(), differences.end(),
                    [](const RankDifference& difference) { return difference.may_be_intended; });
    if (all_may_be_intended)
        return "check that the different values are meant (each host's own network interface, say); where not, give "
               "every rank the same (Open MPI: mpirun -x NAME=value)";
    return "give every rank the same NCCL, driver and NCCL_* variables (Open MPI hands a variable to the ranks on "
           "other hosts only with -x NAME; or set them in the job script on every node)";
}

std::vector<std::string> mapping_lines(const std::vector<RankRecord>& records,
                                       const std::vector<RankOutcome>& outcomes) {
    std::vector<std::string> lines;
    char line[2048];  // room for every field of a RankRecord and its outcome, whole
    std::snprintf(line, sizeof line, "%4s  %-20s %5s  %-20s %4s %4s  %-13s  %s", "rank", "host", "local",
                  "CUDA_VISIBLE_DEVICES", "sees", "GPU", "PCI bus id", "NCCL allreduce");
    lines.push_back(line);
    for (size_t r = 0; r < records.size(); ++r) {
        const RankRecord& record = records[r];
        std::string nccl = "not run";
        if (r < outcomes.size())
            nccl = outcomes[r].error[0]     ? outcomes[r].error
                   : outcomes[r].wrong == 0 ? "correct"
                   : outcomes[r].wrong > 0  ? std::to_string(outcomes[r].wrong) + " elements wrong"
                                            : "not run";
        // CUDA_VISIBLE_DEVICES escaped (a newline in it would break the table into lines that read as others).
        std::snprintf(line, sizeof line, "%4zu  %-20s %5d  %-20s %4d %4s  %-13s  %s", r, record.host, record.local_rank,
                      shown_path(record.visible_devices).c_str(), record.visible_gpus,
                      record.device >= 0 ? std::to_string(record.device).c_str() : "-",
                      record.bus_id[0] ? record.bus_id : "-", nccl.c_str());
        lines.push_back(line);
    }
    return lines;
}

std::string nccl_over_mpi_advice(const std::vector<RankRecord>& records, const std::vector<RankOutcome>& outcomes) {
    // An advice read from a rank's error (NCCL's own warning) comes first: it names the cause.
    for (const RankOutcome& outcome : outcomes)
        for (const char* text : {outcome.error, outcome.nccl_warnings})
            if (const std::string advice = nccl_failure_advice(text); advice != kNcclAdvice) return advice;
    std::set<std::string> hosts;
    for (const RankRecord& record : records) hosts.insert(record.host);
    if (hosts.size() <= 1) return kNcclAdvice;
    return "the ranks are on " + std::to_string(hosts.size()) +
           " hosts, so NCCL's set-up and data cross the network: a set-up that fails or hangs is most often the "
           "wrong network interface (set NCCL_SOCKET_IFNAME to the one the hosts reach each other on, `ip -br "
           "addr`) or a firewall between the hosts; with InfiniBand, check `ibstat` (or try NCCL_IB_DISABLE=1); "
           "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET shows the interfaces NCCL picked";
}

namespace {

// The ranks whose record says `so`.
std::vector<int> ranks_where(const std::vector<RankRecord>& records, const std::function<bool(const RankRecord&)>& so) {
    std::vector<int> ranks;
    for (size_t r = 0; r < records.size(); ++r)
        if (so(records[r])) ranks.push_back(int(r));
    return ranks;
}

std::string rank_list(const std::vector<int>& ranks) {
    std::vector<std::string> names;
    for (int r : ranks) names.push_back(std::to_string(r));
    return join(names, ", ");
}

// This rank takes its GPU (select_gpu_for_rank, a collective: every rank calls it, or none does) and, but
// on rank 0, whose check 1 did, looks at it at rest. What fails once the selection's collectives are done
// is this rank's alone: it goes into the record's gpu_error, as the other ranks would otherwise wait for
// this one until the watchdog ended them.
void take_own_gpu(RankRecord& mine, const std::vector<RankRecord>& before, const MpiCheckOptions& options,
                  const Deadline& deadline) {
    const auto cannot_take = [&](const std::exception& error) {
        mine.device = -1;
        mine.bus_id[0] = '\0';
        copy_text(mine.gpu_error, error.what());
    };
    try {
        mine.device = select_gpu_for_rank(MPI_COMM_WORLD, GpuSharing::warn, backstop_seconds(deadline));
    } catch (const GpuUnavailableError& error) {  // exclusive-process mode: another rank or process has it
        cannot_take(error);
    } catch (const DeviceMemoryError& error) {  // no memory left for a context: another job filled the GPU
        cannot_take(error);
    }
    if (mine.device >= 0) {
        try {
            CUDA_CHECK(cudaDeviceGetPCIBusId(mine.bus_id, sizeof mine.bus_id, mine.device));
            if (options.injection.busy_gpu_rank1 && world_rank() == 1)
                throw GpuUnavailableError("GPU " + std::to_string(mine.device) +
                                          " is held by another process in exclusive-process mode "
                                          "(FWI_DOCTOR_INJECT=busy-gpu-rank1)");
        } catch (const EnvironmentError& error) {
            cannot_take(error);
        }
    }
    if (mine.device >= 0 && world_rank() != 0) examine_own_gpu(mine, before);
}

// The allreduce through NCCL on every rank, and which ranks of its host each one's GPU has peer access
// with; every rank's outcome on rank 0, none on the others.
std::vector<RankOutcome> nccl_over_mpi_on_every_rank(int device, const std::vector<RankRecord>& records,
                                                     const MpiCheckOptions& options, const Deadline& deadline) {
    RankOutcome outcome = nccl_over_mpi(device, options, deadline);  // NVLS kept off by the bootstrap
    const Nvml nvml;
    set_peer_ranks(outcome, records, world_rank(), [&](const std::string& mine, const std::string& other) {
        return nvml.peer_readable({0, 0, 0, mine}, {0, 0, 0, other});
    });
    std::vector<RankOutcome> outcomes(records.size());
    MPI_CHECK(
        MPI_Gather(&outcome, sizeof outcome, MPI_BYTE, outcomes.data(), sizeof outcome, MPI_BYTE, 0, MPI_COMM_WORLD));
    return outcomes;
}

// What NCCL's connections between the ranks show: their table and notes into `finding`'s details and
// facts; the network's verdict and the problems around peer access are returned for the summary.
struct ConnectionFindings {
    Finding network;
    PeerLinkFindings around_peer_access;
};
ConnectionFindings judge_connections(Finding& finding, const std::vector<RankRecord>& records,
                                     const std::vector<RankOutcome>& outcomes) {
    const int ranks = int(records.size());
    const NcclLog connections = merged_connections(outcomes);
    const bool captured = std::any_of(outcomes.begin(), outcomes.end(),
                                      [](const RankOutcome& outcome) { return outcome.log_captured != 0; });
    if (ranks > 1)  // one rank has no connections to show
        for (const std::string& line : transport_lines(connections, ranks, captured, "rank"))
            finding.details.push_back(line);
    for (int r = 0; r < ranks; ++r)
        if (outcomes[r].connections_left_out > 0)
            finding.details.push_back("rank " + std::to_string(r) + ": " +
                                      std::to_string(outcomes[r].connections_left_out) +
                                      " of NCCL's connections not shown (more than fit in 1.5 KiB)");
    finding.facts.add("nccl_connections", transport_json(connections, ranks));
    ConnectionFindings found;
    found.network = network_verdict(records, connections);
    finding.details.insert(finding.details.end(), found.network.details.begin(), found.network.details.end());
    found.around_peer_access = peer_link_verdict(records, outcomes, connections);
    for (const auto& note : found.around_peer_access.notes) finding.details.push_back("note: " + note);
    for (const auto& problem : found.around_peer_access.problems) finding.details.push_back("WARN: " + problem);
    finding.facts.add("peer_link_problems", found.around_peer_access.problems);
    std::vector<int> unknown;  // the ranks whose peers NVML could not say
    for (int r = 0; r < ranks; ++r)
        if (!outcomes[r].peers_known) unknown.push_back(r);
    if (!unknown.empty())
        finding.details.push_back("not judged: NCCL's connections from rank(s) " + rank_list(unknown) +
                                  " to the ranks of their host, as NVML could not say which GPUs have peer access "
                                  "(rank " +
                                  std::to_string(unknown.front()) + ": " + outcomes[unknown.front()].peers_unknown +
                                  ")");
    return found;
}

// Every rank's place (host, GPU, CUDA_VISIBLE_DEVICES), its own checks and its allreduce, for the JSON.
JsonObject mapping_json(const std::vector<RankRecord>& records, const std::vector<RankOutcome>& outcomes) {
    JsonObject mapping;
    for (size_t r = 0; r < records.size(); ++r) {
        JsonObject entry;
        entry.add("host", records[r].host)
            .add("local_rank", records[r].local_rank)
            .add("cuda_visible_devices", records[r].visible_devices)
            .add("visible_gpus", records[r].visible_gpus)
            .add("device", records[r].device)
            .add("pci_bus_id", records[r].bus_id);
        if (records[r].host_check >= 0)  // check 6 on a host other than rank 0's, run by this rank
            entry.add("host_check", status_name(Status(records[r].host_check)))
                .add("host_check_summary", records[r].host_check_summary);
        if (records[r].gpu_check >= 0)  // check 1's health checks of its GPU, run by this rank
            entry.add("gpu_check", status_name(Status(records[r].gpu_check)))
                .add("gpu_check_summary", records[r].gpu_check_summary);
        if (!outcomes.empty())
            entry.add("nccl_wrong", outcomes[r].wrong)
                .add("nccl_error", outcomes[r].error)
                .add("peer_ranks_on_host", outcomes[r].peers_known ? outcomes[r].peer_ranks : "unknown");
        mapping.add(std::to_string(r), entry);
    }
    return mapping;
}

// Why NCCL over MPI did not run, into `finding` (FAIL): ranks that see no GPU (`without_gpu`, by their
// records `before` the GPUs were taken), ranks that could not take theirs (`without_own_gpu`), or ranks
// sharing one (`shared`), which NCCL refuses. One of the three is not empty.
void judge_not_run(Finding& finding, const std::vector<RankRecord>& before, const std::vector<RankRecord>& records,
                   const std::vector<int>& without_gpu, const std::vector<int>& without_own_gpu,
                   const std::vector<std::string>& shared) {
    if (!without_gpu.empty()) {
        finding.status = Status::fail;
        finding.summary = "rank(s) " + rank_list(without_gpu) + " see no GPU; NCCL over MPI not run";
        for (int r : without_gpu)
            if (before[r].no_gpu_cause[0] != '\0')
                finding.details.push_back("rank " + std::to_string(r) + " on host " + before[r].host + ": " +
                                          before[r].no_gpu_cause);
        finding.next =
            "on those ranks' hosts, what each line above says; else check the launcher's GPU binding and "
            "CUDA_VISIBLE_DEVICES there (table above)";
        return;
    }
    if (!without_own_gpu.empty()) {
        for (int r : without_own_gpu)
            finding.details.push_back("rank " + std::to_string(r) + " on host " + records[r].host + ": " +
                                      records[r].gpu_error);
        finding.status = Status::fail;
        finding.summary = "rank(s) " + rank_list(without_own_gpu) + " could not take a GPU; NCCL over MPI not run";
        finding.next = "what each line above says";
        return;
    }
    // Else ranks share a GPU.
    finding.status = Status::fail;
    finding.summary = shared.front() + (shared.size() > 1 ? " (and more)" : "") + "; NCCL over MPI not run";
    finding.next =
        "start at most one rank per GPU on each host: mpirun -np <the hosts' GPUs together> --map-by "
        "ppr:<GPUs per host>:node where every host has as many, else a hostfile whose line for each host says "
        "slots=<its GPUs>; or give each rank its own CUDA_VISIBLE_DEVICES (ranks on instances of one GPU in MIG "
        "mode share its address too: NCCL needs whole GPUs, and check 1 names those in MIG mode)";
}

// The verdicts that check 7 takes into its own: the ranks' differences, the other hosts' check 6, the GPUs
// rank 0 did not see, and NCCL's connections.
struct RankFindings {
    std::vector<RankDifference> differences;
    Finding other_hosts, unseen_gpus;
    ConnectionFindings connections;
};

// The allreduce's outcome on every rank, into `finding`: FAIL where it failed anywhere, with the likely
// causes first; else its time and bandwidth, and a WARN for each problem found around it.
void judge_outcomes(Finding& finding, const std::vector<RankRecord>& records, const std::vector<RankOutcome>& outcomes,
                    const RankFindings& found, size_t nccl_bytes) {
    const int ranks = int(records.size());
    int failed = 0;
    for (const auto& rank_outcome : outcomes) failed += rank_outcome.wrong != 0 || rank_outcome.error[0] != '\0';
    if (failed) {
        finding.status = Status::fail;
        finding.summary = "NCCL allreduce over MPI failed on " + std::to_string(failed) + " of " +
                          std::to_string(ranks) + " ranks (table above)";
        finding.next = nccl_over_mpi_advice(records, outcomes);
        if (!found.differences.empty())
            finding.next =
                "the ranks differ (above): " + rank_differences_advice(found.differences) + "; then " + finding.next;
        // A host's small /dev/shm or low locked-memory limit, or another process on a GPU, is a likely
        // cause: said first.
        for (const Finding& likely_cause : {found.other_hosts, found.unseen_gpus})
            if (likely_cause.status == Status::warn) {
                finding.summary += "; and " + likely_cause.summary;
                if (!likely_cause.next.empty()) finding.next = likely_cause.next + "; then " + finding.next;
            }
        return;
    }
    char text[200];
    std::snprintf(text, sizeof text, "%s, one GPU each; NCCL allreduce of %zu MiB over MPI correct, %.0f us",
                  count_of(ranks, "rank").c_str(), nccl_bytes >> 20, outcomes[0].seconds * 1e6);
    finding.summary = text;
    finding.facts.add("nccl_time_us", outcomes[0].seconds * 1e6);
    if (ranks > 1 && outcomes[0].seconds > 0.0) {
        const double bus_gbps = bus_bandwidth(nccl_bytes, outcomes[0].seconds, ranks) / 1e9;  // as nccl-tests
        std::snprintf(text, sizeof text, " (%.1f GB/s bus bandwidth)", bus_gbps);
        finding.summary += text;
        finding.facts.add("nccl_bus_gbps", bus_gbps);
    }
    if (ranks == 1) {
        finding.status = Status::warn;
        finding.summary += "; but only one rank: nothing between ranks was checked";
        finding.next = "start it with mpirun -np <number of GPUs> doctor --mpi";
    } else if (!found.differences.empty()) {
        finding.status = Status::warn;
        std::vector<std::string> what;
        for (const RankDifference& difference : found.differences)
            what.push_back(difference.line.substr(0, difference.line.find(':')));
        finding.summary += "; but the ranks differ in " + join(what, ", ") + " (above)";
        finding.next = rank_differences_advice(found.differences);
    }
    const auto add_warning = [&](const std::string& problem, const std::string& next) {
        finding.status = Status::warn;
        finding.summary += "; but " + problem;
        finding.next = finding.next.empty() ? next : finding.next + "; and " + next;
    };
    for (const Finding& problem : {found.connections.network, found.other_hosts, found.unseen_gpus})
        if (problem.status == Status::warn) add_warning(problem.summary, problem.next);
    if (const auto& problems = found.connections.around_peer_access.problems; !problems.empty())
        add_warning(problems.front() +
                        (problems.size() > 1 ? " (and " + std::to_string(problems.size() - 1) + " more below)" : ""),
                    found.connections.around_peer_access.advice());
}

}  // namespace

Finding check_mpi(const MpiCheckOptions& options, const Deadline& deadline) {
    if (options.injection.fail_rank1 && world_rank() == 1)
        throw EnvironmentError("rank 1 failed before its first collective (FWI_DOCTOR_INJECT=fail-rank1)");
    const int ranks = world_size();
    const int visible = visible_gpu_count();
    // 1. Every rank's place, then its GPU: where any rank sees none, no rank takes one (a collective).
    RankRecord mine = this_rank(visible);
    const std::vector<RankRecord> before = all_gather(mine);
    const std::vector<int> without_gpu = ranks_where(before, [](const RankRecord& r) { return r.visible_gpus == 0; });
    if (without_gpu.empty()) take_own_gpu(mine, before, options, deadline);
    const std::vector<RankRecord> records = all_gather(mine);
    const std::vector<int> without_own_gpu =
        ranks_where(records, [](const RankRecord& r) { return r.gpu_error[0] != '\0'; });
    const std::vector<std::string> shared = shared_gpus(records);

    // 2. The allreduce through NCCL, where every rank has a GPU of its own (NCCL refuses two ranks on one).
    const bool run_nccl = without_gpu.empty() && without_own_gpu.empty() && shared.empty();
    const std::vector<RankOutcome> outcomes =
        run_nccl ? nccl_over_mpi_on_every_rank(mine.device, records, options, deadline) : std::vector<RankOutcome>{};

    // 3. What the ranks report, and what rank 0 finds in it.
    Finding finding;
    finding.id = "mpi";
    finding.details = mapping_lines(records, outcomes);
    for (const std::string& line : nccl_warning_lines(outcomes)) finding.details.push_back(line);
    RankFindings found;
    found.differences = rank_differences(records);
    for (const RankDifference& difference : found.differences)
        finding.details.push_back("the ranks differ: " + difference.line);
    found.other_hosts = other_hosts_verdict(records);
    finding.details.insert(finding.details.end(), found.other_hosts.details.begin(), found.other_hosts.details.end());
    // Rank 0's check 1 examined the GPUs it sees; the other ranks' GPUs, each rank examined on its own.
    if (world_rank() == 0) {
        std::vector<std::string> seen;
        for (int d = 0; d < visible; ++d) {
            char bus_id[32] = {};
            CUDA_CHECK(cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, d));
            seen.push_back(bus_id);
        }
        found.unseen_gpus = unseen_gpus_verdict(records, seen);
        finding.details.insert(finding.details.end(), found.unseen_gpus.details.begin(),
                               found.unseen_gpus.details.end());
    }
    for (int r = 0; r < ranks; ++r)
        if (records[r].nccl_settings_left_out > 0)
            finding.details.push_back("rank " + std::to_string(r) + ": " +
                                      std::to_string(records[r].nccl_settings_left_out) +
                                      " NCCL_* variables whose values were not compared (more than fit in 2 KiB)");
    if (run_nccl) found.connections = judge_connections(finding, records, outcomes);
    const std::string cuda_aware = cuda_aware_mpi();
    finding.details.push_back("MPI: " + cuda_aware);
    finding.facts.add("ranks", ranks).add("cuda_aware_mpi", cuda_aware);
    finding.facts.add("mapping", mapping_json(records, outcomes));

    // 4. The verdict.
    if (run_nccl)
        judge_outcomes(finding, records, outcomes, found, options.nccl_bytes);
    else
        judge_not_run(finding, before, records, without_gpu, without_own_gpu, shared);
    return finding;
}

}  // namespace fwi::doctor
