#include "nccl_comm.hpp"

#include <strings.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <map>
#include <mutex>
#include <stdexcept>

#include "cli.hpp"
#include "cuda_check.hpp"
#include "errors.hpp"
#include "nccl_check.hpp"
#include "run_env.hpp"

namespace fwi {

namespace {

// The rank and size of every communicator made here, for the messages of a failed wait: ncclCommUserRank
// and ncclCommCount refuse to answer while an operation is in progress or after an error.
struct RankOf {
    int rank = -1, nranks = 0;
};
std::mutex registry_mutex;
std::map<ncclComm_t, RankOf> registry;

void remember(ncclComm_t comm, int rank, int nranks) {
    std::lock_guard<std::mutex> lock(registry_mutex);
    registry[comm] = RankOf{rank, nranks};
}

void forget(ncclComm_t comm) {
    std::lock_guard<std::mutex> lock(registry_mutex);
    registry.erase(comm);
}

RankOf registered_rank(ncclComm_t comm) {
    std::lock_guard<std::mutex> lock(registry_mutex);
    const auto known = registry.find(comm);
    return known == registry.end() ? RankOf{} : known->second;
}

std::vector<int> ranks_of(const std::vector<ncclComm_t>& comms, int& nranks) {
    std::vector<int> ranks;
    nranks = 0;
    for (ncclComm_t comm : comms) {
        const RankOf rank = registered_rank(comm);
        ranks.push_back(rank.rank);
        nranks = std::max(nranks, rank.nranks);
    }
    return ranks;
}

ncclConfig_t nonblocking_config() {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    return config;
}

// One poll over every communicator and stream: failed as soon as one reports an error (with `detail`
// set), pending while any operation is still being issued (ncclInProgress) or running on its stream.
PollStatus poll_comms_and_streams(const std::vector<ncclComm_t>& comms, const std::vector<cudaStream_t>& streams,
                                  std::string& detail) {
    bool pending = false;
    for (ncclComm_t comm : comms) {
        ncclResult_t state = ncclSuccess;
        const ncclResult_t status = ncclCommGetAsyncError(comm, &state);
        if (status != ncclSuccess) state = status;
        if (state == ncclInProgress) {
            pending = true;
        } else if (state != ncclSuccess) {
            detail = nccl_error_text(state);
            return PollStatus::failed;
        }
    }
    for (cudaStream_t stream : streams) {
        const cudaError_t status = cudaStreamQuery(stream);
        if (status == cudaErrorNotReady) {
            pending = true;
        } else if (status != cudaSuccess) {
            detail = std::string("CUDA ") + cudaGetErrorName(status) + ": " + cudaGetErrorString(status);
            return PollStatus::failed;
        }
    }
    return pending ? PollStatus::pending : PollStatus::done;
}

}  // namespace

void prepare_nccl() {
    // NCCL reads a variable set to the empty string as unset (its own default: NVLS on where the GPUs support
    // it, the ranks connected at their first collective), so an empty one is no choice of the user's: set it.
    const auto set_unless_chosen = [](const char* name, const char* value) {
        const char* chosen = std::getenv(name);
        if (!chosen || !*chosen) set_environment_variable(name, value);
    };
    set_unless_chosen("NCCL_NVLS_ENABLE", "0");
    set_unless_chosen("NCCL_RUNTIME_CONNECT", "0");  // connect while making a communicator (the top of nccl_comm.hpp)
    set_env_field("nccl_version", nccl_version_number());
    static const bool warned = [] {
        for (const std::string& setting : nccl_settings_without_time_limit()) print_warning(setting);
        return true;
    }();
    (void)warned;
}

std::vector<std::string> nccl_settings_without_time_limit() {
    const auto value_of = [](const char* name) {
        const char* value = std::getenv(name);
        return std::string(value ? value : "");
    };
    // As NCCL reads these two (ncclLoadParam): an integer (strtoll, base 0), any value but 0 turning the
    // setting on. An empty value, or one out of range, is NCCL's default: on for RUNTIME_CONNECT, for
    // COMM_BLOCKING the communicator's own setting (non-blocking here). Unset: prepare_nccl's choice.
    const auto on = [](const char* name, bool by_default) {
        const char* value = std::getenv(name);
        if (!value) return false;
        if (!*value) return by_default;
        errno = 0;
        const long long number = std::strtoll(value, nullptr, 0);
        return errno == ERANGE ? by_default : number != 0;
    };
    const std::string without_limit =
        ": a wait there has no time limit of its own; --timeout cannot interrupt it, and ends the program only "
        "later, through another wait";
    std::vector<std::string> settings;
    if (on("NCCL_COMM_BLOCKING", false))
        settings.push_back("NCCL_COMM_BLOCKING=" + shown_value(value_of("NCCL_COMM_BLOCKING")) +
                           " makes NCCL's communicators with calls that block inside NCCL" + without_limit);
    if (on("NCCL_RUNTIME_CONNECT", true))
        settings.push_back("NCCL_RUNTIME_CONNECT=" + shown_value(value_of("NCCL_RUNTIME_CONNECT")) +
                           " connects the ranks in their first collective, which waits for the others in NCCL" +
                           without_limit);
    if (strcasecmp(value_of("NCCL_LAUNCH_MODE").c_str(), "GROUP") == 0)  // as NCCL compares it
        settings.push_back("NCCL_LAUNCH_MODE=" + value_of("NCCL_LAUNCH_MODE") +
                           " makes the GPUs of one process wait for each other inside their NCCL calls" +
                           without_limit);
    return settings;
}

std::string nccl_version_number() {
    int code = 0;
    NCCL_CHECK(ncclGetVersion(&code));
    // Since 2.9 the code is major * 10000 + minor * 100 + patch (before: major * 1000 + minor * 100 + patch).
    const int major = code >= 10000 ? code / 10000 : code / 1000;
    const int minor = code >= 10000 ? code % 10000 / 100 : code % 1000 / 100;
    const int patch = code % 100;
    return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

std::string nccl_version_string() { return "NCCL " + nccl_version_number(); }

std::string nccl_transport_hint() {
    return "to see the transports NCCL picks, run with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH: lines like "
           "'Channel 00/0 : 0[0] -> 1[1] via P2P/direct pointer' (GPUs of one process) or 'via P2P/CUMEM' (a process "
           "per GPU) are NVLink or PCIe peer copies, 'via SHM' goes through host memory, and 'via NET/IB' or "
           "'NET/Socket' is NCCL's network transport (across nodes, or with --transport network)";
}

void add_nccl_transport_flag(ArgParser& parser, std::string& transport) {
    parser.add_choice("--transport", &transport, {"auto", "network"},
                      "auto: NCCL's choice; network: NCCL's network transport even between GPUs of one host "
                      "(NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1), what crossing nodes costs");
}

std::string apply_nccl_transport(const std::string& transport) {
    if (transport == "auto")
        return "transport: auto (NCCL's choice: P2P over NVLink or PCIe within a node, the network across nodes)";
    if (transport != "network")  // the parser allows only the two (add_nccl_transport_flag)
        throw std::logic_error("apply_nccl_transport: unknown transport '" + transport + "'");
    // With peer copies and shared memory both off, the only transport NCCL has left between two GPUs
    // is its network one, even when they sit in the same host.
    set_environment_variable("NCCL_P2P_DISABLE", "1");
    set_environment_variable("NCCL_SHM_DISABLE", "1");
    return "transport: network (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1: what crossing nodes costs, measured on one "
           "host)";
}

void nccl_abort(ncclComm_t comm, double limit_s, const std::string& why) {
    if (comm == nullptr) return;  // never made (a group that failed before its call)
    static std::mutex one_at_a_time;
    const std::lock_guard<std::mutex> serial(one_at_a_time);
    // The reason first: the exception that would have carried it is never thrown.
    const std::string name = running_program_name();
    end_process_if_late(limit_s,
                        (why.empty() ? "" : name + ": environment: " + why + "\n") + name +
                            ": environment: ncclCommAbort did not return within " + format_seconds(limit_s) +
                            " s (a known problem of some NCCL versions); ending the process\n",
                        [&] {
                            ncclCommAbort(comm);
                            forget(comm);
                        });
}

namespace {

// What is left of a time limit of timeout_s that began at `start` (steady_seconds), never below zero: the
// steps of making a communicator share one limit.
[[maybe_unused]] double seconds_left(double start, double timeout_s) {
    return std::max(0.0, timeout_s - (steady_seconds() - start));
}

// The end of a failed wait or call: the message, made while the registry still knows the ranks, then the
// aborts (which never wait for peers: they stop this rank's kernels and free the communicators, so the
// program can exit instead of hanging on a rank that will never answer), then the exception.
[[noreturn]] void abort_and_throw(const std::vector<ncclComm_t>& comms, const std::string& what, WaitOutcome outcome,
                                  double timeout_s, const std::string& detail, const char* timeout_hint = nullptr) {
    int nranks = 0;
    const std::vector<int> ranks = ranks_of(comms, nranks);
    const std::string message =
        nccl_wait_failure_message(what, ranks, nranks, outcome, timeout_s, detail, timeout_hint);
    for (ncclComm_t comm : comms) nccl_abort(comm, kNcclAbortLimitSeconds, message);
    throw EnvironmentError(message);
}

// Step 2 of the top of nccl_comm.hpp: from each non-blocking communicator a blocking one of the same ranks
// in the same order, all in one group (one thread making several ranks must issue them together, like their
// creation); then the non-blocking ones are finalized and destroyed, so their buffers do not stay beside the
// new ones'. The split ends within what is left of the limit that began at `start` (a timeout says
// `timeout_hint`, where given); the finalize gets at least 5 s.
std::vector<ncclComm_t> split_blocking(const std::vector<ncclComm_t>& parents, double start, double timeout_s,
                                       const char* timeout_hint) {
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 18, 0)
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 1;
    std::vector<ncclComm_t> children(parents.size(), nullptr);
    // (ncclInProgress: the split goes on in the background. A failure aborts the parents.)
    nccl_group(parents, "NCCL communicator creation (the split into a blocking one)", [&] {
        for (size_t i = 0; i < parents.size(); ++i)
            NCCL_CHECK(ncclCommSplit(parents[i], 0, registered_rank(parents[i]).rank, &children[i], &config));
    });
    wait_for_nccl(parents, {},
                  "NCCL communicator creation (the split into a blocking one, in what was left of the limit)",
                  seconds_left(start, timeout_s), timeout_hint);
    for (size_t i = 0; i < parents.size(); ++i) {
        const RankOf rank = registered_rank(parents[i]);
        remember(children[i], rank.rank, rank.nranks);
    }
    // At least a few seconds: a set-up that used most of the limit must not end in a finalize "not finished
    // after 0.01 s (--timeout)" of communicators nothing else waits on.
    constexpr double kLeastFinalizeSeconds = 5.0;
    nccl_destroy_all(parents, std::max(seconds_left(start, timeout_s), kLeastFinalizeSeconds));
    return children;
#else
    (void)start, (void)timeout_s, (void)timeout_hint;
    return parents;  // no ncclCommSplit: the non-blocking communicators themselves
#endif
}

}  // namespace

void wait_for_nccl(const std::vector<ncclComm_t>& comms, const std::vector<cudaStream_t>& streams,
                   const std::string& what, double timeout_s, const char* timeout_hint) {
    std::string detail;
    // Spin for the first millisecond: a collective of a few MB ends within microseconds of the last rank's
    // call, and a sleep would add its own latency to every timed allreduce. Time the process was stopped
    // (a debugger, Ctrl-Z) does not count against the limit, as in wait_for_event_within.
    constexpr double kSpinSeconds = 1e-3, kLongestPollStep = 1.0;
    const WaitOutcome outcome =
        poll_until_done([&] { return poll_comms_and_streams(comms, streams, detail); }, timeout_s,
                        clock_without_stops(steady_seconds, kLongestPollStep), spin_then_sleep(kSpinSeconds));
    if (outcome == WaitOutcome::done) {
        nccl_warnings_so_far_succeeded();
        return;
    }
    abort_and_throw(comms, what, outcome, timeout_s, detail, timeout_hint);
}

void wait_until_issued(ncclResult_t status, const std::vector<ncclComm_t>& comms, const std::string& what,
                       double timeout_s) {
    if (status == ncclInProgress) wait_for_nccl(comms, {}, "issuing " + what, timeout_s);
}

ncclResult_t nccl_check_or_abort(ncclResult_t status, const std::vector<ncclComm_t>& comms, const std::string& what) {
    if (status == ncclSuccess || status == ncclInProgress) return status;
    abort_and_throw(comms, what, WaitOutcome::failed, 0.0, nccl_error_text(status));
}

ncclResult_t nccl_group(const std::vector<ncclComm_t>& comms, const std::string& what,
                        const std::function<void()>& calls) {
    NCCL_CHECK(ncclGroupStart());
    try {
        calls();
    } catch (...) {
        // Closes the group: after an NCCL error it launches nothing and returns that error again; after
        // another (a CUDA call's) it may launch part of the group, which the aborts then stop.
        ncclGroupEnd();
        for (ncclComm_t comm : comms) nccl_abort(comm, kNcclAbortLimitSeconds, "a call failed in " + what);
        throw;
    }
    return nccl_check_or_abort(ncclGroupEnd(), comms, what);
}

ncclUniqueId nccl_unique_id() {
    prepare_nccl();
    ncclUniqueId id;
    NCCL_CHECK(ncclGetUniqueId(&id));
    return id;
}

std::vector<ncclComm_t> nccl_init_all(const std::vector<int>& devices, double timeout_s) {
    const double start = steady_seconds();
    const int n = static_cast<int>(devices.size());
    const ncclUniqueId id = nccl_unique_id();
    ncclConfig_t config = nonblocking_config();
    std::vector<ncclComm_t> comms(n, nullptr);
    int current_device = 0;
    CUDA_CHECK(cudaGetDevice(&current_device));
    // One thread creating n ranks of one communicator: each init waits for the others, so they must be
    // issued together in a group (what ncclCommInitAll does inside). ncclInProgress: the init goes on in the
    // background. A failure aborts those already made.
    nccl_group(comms, "NCCL communicator creation", [&] {
        for (int rank = 0; rank < n; ++rank) {
            CUDA_CHECK(cudaSetDevice(devices[rank]));
            NCCL_CHECK(ncclCommInitRankConfig(&comms[rank], n, id, rank, &config));
            remember(comms[rank], rank, n);
        }
    });
    CUDA_CHECK(cudaSetDevice(current_device));
    wait_for_nccl(comms, {}, "NCCL communicator creation", timeout_s);
    return split_blocking(comms, start, timeout_s, nullptr);
}

ncclComm_t nccl_init_rank(int nranks, const ncclUniqueId& id, int rank, double timeout_s) {
    const double start = steady_seconds();
    prepare_nccl();
    ncclConfig_t config = nonblocking_config();
    ncclComm_t comm = nullptr;
    NCCL_CHECK(ncclCommInitRankConfig(&comm, nranks, id, rank, &config));
    remember(comm, rank, nranks);
    wait_for_nccl({comm}, {}, "NCCL communicator creation", timeout_s, kNcclConnectHint);
    return split_blocking({comm}, start, timeout_s, kNcclConnectHint).front();
}

void nccl_destroy_all(const std::vector<ncclComm_t>& comms, double timeout_s) {
    // On a blocking communicator the finalize is done when the group returns, which waits for the other
    // ranks without a limit, and the destroy joins NCCL's proxy thread, which can hang in the network: so
    // each of the two runs under a limit that ends the process: timeout_s and as long as an abort is allowed
    // (a caller near the end of its own limit passes what is left of it; doctor's watchdog, which reports a
    // check 10 s past its limit, comes first). The wait between them has its own.
    const double limit_s = timeout_s + kNcclAbortLimitSeconds;
    int nranks = 0;
    const std::string ranks = describe_ranks(ranks_of(comms, nranks), nranks);
    const auto too_late = [&](const std::string& what) {
        const std::string name = running_program_name();
        return name + ": environment: " + what + " on " + ranks + " not done within " + format_seconds(limit_s) +
               " s (another rank failed, hung or is much slower, or NCCL's network proxy is stuck); ending the "
               "process\n";
    };
    // One thread finalizing several ranks must issue them together, like their creation. On a non-blocking
    // communicator (an NCCL before 2.18, or NCCL_COMM_BLOCKING=0 in the environment, which overrides the
    // configuration) the finalize goes on in the background, and the wait below polls it.
    // (A failed finalize ends them as a failed wait does: nccl_group aborts them.)
    end_process_if_late(limit_s, too_late("NCCL communicator finalize"), [&] {
        nccl_group(comms, "NCCL communicator finalize", [&] {
            for (ncclComm_t comm : comms) NCCL_CHECK(ncclCommFinalize(comm));
        });
    });
    wait_for_nccl(comms, {}, "NCCL communicator finalize", timeout_s);
    end_process_if_late(limit_s, too_late("NCCL communicator destroy"), [&] {
        for (ncclComm_t comm : comms) {
            NCCL_CHECK(ncclCommDestroy(comm));
            forget(comm);
        }
    });
}

std::string describe_ranks(const std::vector<int>& ranks, int nranks) {
    std::string text = ranks.size() == 1 ? "rank " : "ranks ";
    for (size_t i = 0; i < ranks.size(); ++i) text += (i ? ", " : "") + (ranks[i] < 0 ? "?" : std::to_string(ranks[i]));
    return text + " of " + (nranks > 0 ? std::to_string(nranks) : "?");
}

const char* const kNcclConnectHint =
    "every rank had started it (they met just before), so they most likely cannot connect: across nodes, the "
    "network NCCL picked (NCCL_SOCKET_IFNAME; NCCL_IB_HCA for InfiniBand) or a firewall between the nodes; "
    "doctor --mpi checks the connections, and NCCL_DEBUG=INFO shows what NCCL tried";

std::string nccl_wait_failure_message(const std::string& what, const std::vector<int>& ranks, int nranks,
                                      WaitOutcome outcome, double timeout_s, const std::string& detail,
                                      const char* timeout_hint) {
    const std::string aborted = ranks.size() == 1 ? "aborted the communicator" : "aborted the communicators";
    std::string message = what + " on " + describe_ranks(ranks, nranks) + ": ";
    if (outcome == WaitOutcome::timed_out)
        message += "not finished after " + format_number(timeout_s) + " s (--timeout); " + aborted + ". Hint: " +
                   (timeout_hint ? timeout_hint
                                 : "another rank has probably died, hung or never made the same call; look for its "
                                   "error above, or rerun with NCCL_DEBUG=WARN");
    else
        message += "failed: " + detail + "; " + aborted +
                   ". Hint: a peer rank or its GPU failed; rerun with NCCL_DEBUG=WARN for NCCL's own message";
    return message;
}

}  // namespace fwi
