#include "mpi_env.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cli.hpp"
#include "errors.hpp"
#include "fnv1a.hpp"
#include "mpi_check.hpp"
#include "run_env.hpp"
#include "team.hpp"

namespace fwi {

namespace {

// An error that every rank meets (a bad flag, more ranks than shots) would otherwise be printed by
// every rank. Rank 0 reports at once and its MPI_Abort ends the job; the others wait this long first,
// so their copy is printed only when rank 0 did not fail. Never more than a quarter of the shortest
// WaitTimeout this process made (a --timeout of 1 s, say): rank 0, waiting on the failed rank under the
// same --timeout, would otherwise end the job first with its own "no progress" message and exit code.
constexpr double kNonRootReportDelaySeconds = 1.0;
std::atomic<double> g_shortest_wait_timeout_s{kNonRootReportDelaySeconds * 4};

double non_root_report_delay_seconds() {
    return std::min(kNonRootReportDelaySeconds, g_shortest_wait_timeout_s.load() / 4);
}

using Clock = std::chrono::steady_clock;

// The first line of MPI_Get_library_version ("Open MPI v4.1.4, package: ..."), for the env of the RESULT.
std::string mpi_library_version() {
    char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
    int length = 0;
    MPI_Get_library_version(text, &length);
    const std::string version = text;
    return version.substr(0, version.find('\n'));
}

// How long the ranks may take to meet once MPI_Init has returned (it returns when every rank has started).
// Not --timeout, which is not parsed yet.
constexpr double kStartTimeoutSeconds = 60.0;
// Why that first message may not arrive: MPI_Init exchanges its addresses through the launcher, so the
// first message between the ranks is the first to cross MPI's own network.
constexpr const char* kFirstMessageCause =
    "the first message between the ranks; across nodes, the network interface MPI picked for its messages "
    "(Open MPI: OMPI_MCA_btl_tcp_if_include=<interface>, or OMPI_MCA_btl_tcp_if_exclude=docker0,virbr0,lo) or a "
    "firewall between the nodes; else another rank failed or hung at its start";

// A hash (FNV-1a) of the program's name and argv[1..], each with its terminating NUL ("ab" "c" is not
// "a" "bc"): what every rank of a job must agree on.
std::uint64_t hash_of_command_line(const char* name, int argc, char** argv) {
    std::uint64_t hash = fnv1a(name, std::strlen(name) + 1);
    for (int i = 1; i < argc; ++i) hash = fnv1a(argv[i], std::strlen(argv[i]) + 1, hash);
    return hash;
}

// Throws UsageError on every rank when the ranks were not all given the same program and arguments (an
// MPMD launch, a wrapper that adds a flag on some nodes). They would parse different runs, and one would
// wait forever in a collective the others never make: --help on one rank, or a check only some ran.
void require_same_command_line(const char* name, int argc, char** argv) {
    const std::uint64_t mine = hash_of_command_line(name, argc, argv);
    std::uint64_t largest[2] = {mine, ~mine};  // the largest hash, and the complement of the smallest
    {
        const WaitTimeout guard("the other ranks' command lines", kStartTimeoutSeconds, kFirstMessageCause);
        MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, largest, 2, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD));
    }
    if (largest[0] != ~largest[1])
        throw BadSettingError(
            "the ranks were given different command lines; start every rank with the same program and arguments");
}

bool asks_for_help(int argc, char** argv) {
    for (int i = 1; i < argc; ++i)
        if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) return true;
    return false;
}

}  // namespace

// What the innermost live WaitTimeout guards.
struct WaitTimeout::State {
    bool armed = false;
    Clock::time_point deadline;
    double timeout_s = 0.0;
    std::string what, likely_cause;
};

namespace {

// The innermost WaitTimeout's deadline, watched by a thread started with the first guard. The watcher
// sleeps until the deadline it last saw and then looks again; a guard wakes it only when its own
// deadline is earlier than that, so a guard usually costs a lock and no system call.
struct Watcher : WaitTimeout::State {
    std::mutex mutex;
    std::condition_variable armed_changed;
    Clock::time_point sleeping_until = Clock::time_point::max();

    // Under the lock: wake the watcher if the deadline now comes before the one it sleeps towards.
    void deadline_changed() {
        if (armed && deadline < sleeping_until) armed_changed.notify_one();
    }

    void run() {
        std::unique_lock<std::mutex> lock(mutex);
        for (;;) {
            if (!armed) {
                sleeping_until = Clock::time_point::max();
                armed_changed.wait(lock);
                continue;
            }
            const Clock::time_point until = deadline;
            sleeping_until = until;
            armed_changed.wait_until(lock, until);
            if (armed && deadline == until && Clock::now() >= until) {
                end_process_now(kExitEnvironment,  // the other ranks are ended by mpirun
                                std::string(running_program_name()) + ": environment: no progress for " +
                                    format_seconds(timeout_s) + " s waiting for " + what + " (" + likely_cause + ")\n");
            }
        }
    }
};

Watcher& watcher() {
    static Watcher* instance = [] {
        auto* w = new Watcher;  // never destroyed: the detached thread may use it until the process ends
        std::thread([w] { w->run(); }).detach();
        return w;
    }();
    return *instance;
}

}  // namespace

WaitTimeout::WaitTimeout(std::string what, double timeout_s, std::string likely_cause) {
    double shortest = g_shortest_wait_timeout_s.load();
    while (timeout_s < shortest && !g_shortest_wait_timeout_s.compare_exchange_weak(shortest, timeout_s)) {
    }
    Watcher& w = watcher();
    std::lock_guard<std::mutex> lock(w.mutex);
    enclosing_ = std::make_unique<State>(static_cast<const State&>(w));
    w.what = std::move(what);
    w.likely_cause = std::move(likely_cause);
    w.timeout_s = timeout_s;
    w.deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
    w.armed = true;
    w.deadline_changed();
}

WaitTimeout::~WaitTimeout() {
    Watcher& w = watcher();
    std::lock_guard<std::mutex> lock(w.mutex);
    static_cast<State&>(w) = std::move(*enclosing_);
    w.deadline_changed();
}

namespace {
std::atomic<double> g_finalize_limit_s{kFinalizeLimitSeconds};

// MPI_Abort, which asks the launcher to end every rank; where that exchange hangs, this process ends alone
// after a few seconds, with `code`, and the launcher sees it go.
[[noreturn]] void abort_job(int code) {
    constexpr double kAbortLimitSeconds = 10.0;
    end_process_if_late(
        kAbortLimitSeconds, "", [&] { MPI_Abort(MPI_COMM_WORLD, code); }, code);
    end_process_now(code);  // MPI_Abort returned, which it should not
}
}  // namespace

void set_finalize_limit(double seconds) { g_finalize_limit_s = seconds; }

int run_mpi_program(const char* name, int argc, char** argv, const std::function<int()>& body) {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);  // under mpirun stdout is a pipe: show progress line by line
    // FUNNELED: the lessons may run helper threads, but only the main thread calls MPI.
    // Read before MPI_Init, which may set some of the variables itself.
    const LaunchEnvironment launch = launch_environment();
    int provided = 0;
    int initialized = MPI_ERR_OTHER;
    // MPI_Init meets the other ranks, and waits for them without a limit where they cannot reach it.
    end_process_if_late(kStartLimitSeconds,
                        std::string(name) + ": environment: MPI_Init did not return within " +
                            format_number(kStartLimitSeconds) +
                            " s: the ranks could not reach each other (across nodes: the network interface MPI "
                            "picked, e.g. Open MPI's OMPI_MCA_btl_tcp_if_include and OMPI_MCA_oob_tcp_if_include, or a "
                            "firewall between the nodes); ending the process\n",
                        [&] { initialized = MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided); });
    if (initialized != MPI_SUCCESS) {
        std::fprintf(stderr, "%s: environment: MPI_Init failed (start it with mpirun; check the MPI installation)\n",
                     name);
        return kExitEnvironment;
    }
    // Errors returned, not fatal: MPI_CHECK then reports them with the suite's messages and exit codes.
    if (MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN) != MPI_SUCCESS || provided < MPI_THREAD_FUNNELED) {
        std::fprintf(stderr, "%s: environment: this MPI library %s (check the MPI installation)\n", name,
                     provided < MPI_THREAD_FUNNELED ? "does not support threads (MPI_THREAD_FUNNELED)"
                                                    : "refused to return errors (MPI_ERRORS_RETURN)");
        abort_job(kExitEnvironment);
    }
    set_env_field("mpi_library_version", mpi_library_version());
    const int rank = world_rank();
    // "name (rank r)": how this process names itself in messages (running_program_name, from run_program).
    static std::string process_name;
    process_name = std::string(name) + " (rank " + std::to_string(rank) + ")";
    // Every rank parses the same argv with the same parser, so all of them see --help (and return 0)
    // or the same bad flag (and fail with 2) without asking each other; rank 0 alone prints the help.
    ArgParser::set_prints_help(rank == 0);

    // Checked before the body, so that no process of a mistaken launch starts the work alone (--help
    // still answers).
    const bool check_launch = !asks_for_help(argc, argv);
    bool failed = true;
    const int code = run_and_report(process_name.c_str(), [&]() -> int {
        try {
            require_same_command_line(name, argc, argv);
            if (check_launch)
                if (const std::string mismatch = launch_mismatch(world_size(), launch); !mismatch.empty())
                    throw BadSettingError(mismatch);
            const int status = body();
            failed = false;
            return status;
        } catch (...) {
            std::fflush(stdout);
            if (rank != 0) std::this_thread::sleep_for(std::chrono::duration<double>(non_root_report_delay_seconds()));
            throw;
        }
    });
    int ranks = 2;  // where MPI cannot say, as if others waited
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    if (failed && ranks > 1) {
        std::fflush(stdout);
        std::fflush(stderr);
        abort_job(code);  // ends every rank, so none waits forever on this one
    }
    // Past a wait on the GPU that gave up (abandon_gpu_work), MPI_Finalize and CUDA's teardown could wait on
    // that work: the process ends at once instead.
    if (gpu_work_abandoned()) return finish_program(code);
    // One rank (run without mpirun, or -np 1): no other waits for it, so it ends as after success, without
    // the banner MPI_Abort prints after the error.
    {
        // The ranks have met at the end of their work (the lessons' and doctor's last barrier), so this is
        // quick; it would wait without a limit where a rank has gone since (killed, or its node lost) and
        // the launcher has not ended the job.
        WaitTimeout guard("MPI_Finalize", g_finalize_limit_s,
                          "a rank has gone since the last barrier, and the launcher did not end the job");
        if (MPI_Finalize() != MPI_SUCCESS && code == kExitOk) {
            std::fprintf(stderr, "%s: environment: MPI_Finalize failed\n", process_name.c_str());
            return kExitEnvironment;
        }
    }
    return code;
}

void barrier_with_timeout(MPI_Comm comm, const std::string& what, double timeout_s) {
    WaitTimeout guard(what, timeout_s);
    MPI_CHECK(MPI_Barrier(comm));
}

void wait_for_rank0_to_finish(double run_seconds, double timeout_s) {
    barrier_with_timeout(MPI_COMM_WORLD, "rank 0's single-GPU reference and report",
                         member0_allowance(world_rank(), world_size(), run_seconds) + timeout_s);
}

int world_rank() {
    int rank = 0;
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    return rank;
}

int world_size() {
    int size = 1;
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    return size;
}

std::string mpi_processor_name() {
    char name[MPI_MAX_PROCESSOR_NAME] = {};
    int length = 0;
    MPI_CHECK(MPI_Get_processor_name(name, &length));
    return std::string(name, length);
}

std::vector<std::string> gather_on_rank0(const std::string& text, const std::string& what, double timeout_s) {
    const bool root = world_rank() == 0;
    const int ranks = world_size();
    const int length = int(text.size());
    std::vector<int> lengths(root ? ranks : 0), offsets(root ? ranks : 0);
    const WaitTimeout guard(what, timeout_s);
    MPI_CHECK(MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, MPI_COMM_WORLD));
    for (int r = 1; r < int(offsets.size()); ++r) offsets[r] = offsets[r - 1] + lengths[r - 1];
    std::vector<char> all(root ? size_t(offsets.back() + lengths.back()) + 1 : 0);  // + 1: never null on rank 0
    MPI_CHECK(MPI_Gatherv(text.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR, 0,
                          MPI_COMM_WORLD));
    std::vector<std::string> texts;
    for (int r = 0; r < int(lengths.size()); ++r) texts.emplace_back(all.data() + offsets[r], size_t(lengths[r]));
    return texts;
}

namespace {

// FWI_TEST_NODE_OF_RANK's entry for `rank` of `size` ranks (see node_local_communicator).
int fake_node_of(const std::string& list, int rank, int size) {
    std::vector<std::string> entries;
    try {
        entries = split_comma_list("FWI_TEST_NODE_OF_RANK", list, "one node number per rank");
    } catch (const UsageError& error) {  // a variable's value, not a flag's: no hint to --help
        throw BadSettingError(error.what());
    }
    std::vector<int> nodes;
    for (const std::string& entry : entries) {
        // Digits only, as the flags' lists take them (strtol would also take blanks and a sign).
        const bool digits = entry.size() <= 7 && entry.find_first_not_of("0123456789") == std::string::npos;
        if (!digits || std::stol(entry) > 1000000)
            throw BadSettingError("FWI_TEST_NODE_OF_RANK: '" + shown_value(entry) +
                                  "' is not a node number (0..1000000)");
        nodes.push_back(std::stoi(entry));
    }
    if (static_cast<int>(nodes.size()) != size)
        throw BadSettingError(
            "FWI_TEST_NODE_OF_RANK: " + count_of(static_cast<long long>(nodes.size()), "node number") + " for " +
            count_of(size, "rank") + "; give one node number per rank");
    return nodes[rank];
}

}  // namespace

MPI_Comm node_local_communicator(MPI_Comm comm) {
    int rank = 0, size = 1;
    MPI_CHECK(MPI_Comm_rank(comm, &rank));
    MPI_CHECK(MPI_Comm_size(comm, &size));
    MPI_Comm node_comm = MPI_COMM_NULL;
    if (const char* fake_nodes = std::getenv("FWI_TEST_NODE_OF_RANK"); fake_nodes && *fake_nodes) {
        // Checked on every rank before the collective split, so a bad list fails everywhere at once.
        const int node = fake_node_of(fake_nodes, rank, size);
        static bool said = false;  // set by accident, it would place the ranks on nodes they are not on
        if (rank == 0 && !std::exchange(said, true))
            print_warning("FWI_TEST_NODE_OF_RANK=" + shown_value(fake_nodes) +
                          " is set, a test setting: the ranks are placed on the nodes it names, not on their own "
                          "(unset it outside the tests)");
        MPI_CHECK(MPI_Comm_split(comm, node, rank, &node_comm));
        return node_comm;
    }
    MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node_comm));
    return node_comm;
}

NodeLocalRank node_local_rank(MPI_Comm comm) {
    MPI_Comm node_comm = node_local_communicator(comm);
    NodeLocalRank local;
    MPI_CHECK(MPI_Comm_rank(node_comm, &local.rank));
    MPI_CHECK(MPI_Comm_size(node_comm, &local.size));
    MPI_CHECK(MPI_Comm_free(&node_comm));
    return local;
}

int ranks_on_this_node(double timeout_s) {
    const WaitTimeout guard("the other ranks, to count those on this node", timeout_s);
    return node_local_rank(MPI_COMM_WORLD).size;
}

namespace {

// One GPU each for as many ranks as can have one (a matching of ranks to the GPUs they see, by augmenting
// paths): rank `rank` takes a free GPU it sees, the first in its own order, or else one that a rank before
// it holds and can give up for another it sees.
class GpuMatching {
public:
    explicit GpuMatching(const std::vector<std::vector<std::string>>& visible)
        : visible_(visible), chosen_(visible.size(), -1) {}

    bool place(int rank) {
        const std::vector<std::string>& gpus = visible_[size_t(rank)];
        for (int g = 0; g < int(gpus.size()); ++g)
            if (!holder_.count(gpus[size_t(g)])) return take(rank, g);
        for (int g = 0; g < int(gpus.size()); ++g) {
            const std::string& gpu = gpus[size_t(g)];
            if (!tried_.insert(gpu).second) continue;
            if (place(holder_.at(gpu))) return take(rank, g);
        }
        return false;
    }
    void start_search() { tried_.clear(); }
    const std::vector<int>& chosen() const { return chosen_; }

private:
    bool take(int rank, int g) {
        holder_[visible_[size_t(rank)][size_t(g)]] = rank;
        chosen_[size_t(rank)] = g;
        return true;
    }
    const std::vector<std::vector<std::string>>& visible_;
    std::vector<int> chosen_;            // rank -> index into its visible GPUs, -1: none yet
    std::map<std::string, int> holder_;  // bus id -> the rank that holds it
    std::set<std::string> tried_;        // GPUs this search already tried to free
};

}  // namespace

std::vector<int> choose_gpus_on_node(const std::vector<std::vector<std::string>>& visible) {
    GpuMatching matching(visible);
    for (int rank = 0; rank < int(visible.size()); ++rank) {
        matching.start_search();
        matching.place(rank);
    }
    // More ranks than GPUs: those left over share, each taking the GPU it sees that the fewest ranks use.
    std::vector<int> chosen = matching.chosen();
    std::map<std::string, int> ranks_on;
    for (size_t rank = 0; rank < visible.size(); ++rank)
        if (chosen[rank] >= 0) ++ranks_on[visible[rank][size_t(chosen[rank])]];
    for (size_t rank = 0; rank < visible.size(); ++rank) {
        if (chosen[rank] >= 0 || visible[rank].empty()) continue;
        int best = 0;
        for (int g = 1; g < int(visible[rank].size()); ++g)
            if (ranks_on[visible[rank][size_t(g)]] < ranks_on[visible[rank][size_t(best)]]) best = g;
        ++ranks_on[visible[rank][size_t(best)]];
        chosen[rank] = best;
    }
    return chosen;
}

GpusOnNode gpus_on_node(const std::vector<std::string>& bus_ids, int local_rank) {
    GpusOnNode gpus;
    for (size_t r = 0; r < bus_ids.size(); ++r) {
        if (bus_ids[r] == bus_ids.at(size_t(local_rank))) gpus.sharing_mine.push_back(int(r));
        gpus.distinct += std::find(bus_ids.begin(), bus_ids.begin() + long(r), bus_ids[r]) == bus_ids.begin() + long(r);
    }
    return gpus;
}

std::string ranks_sharing_gpus(int ranks, const std::string& host, int distinct) {
    return std::to_string(ranks) + " ranks on host " + host + " share " + count_of(distinct, "GPU");
}

std::string at_most_ranks_per_node(int gpus) {
    return "start at most " + count_of(gpus, "rank") + " per node (mpirun -np N --map-by ppr:" + std::to_string(gpus) +
           ":node)";
}

std::string one_gpu_per_rank_refusal(int ranks, const std::string& host, int distinct) {
    return ranks_sharing_gpus(ranks, host, distinct) +
           "; this program needs one GPU per rank: " + at_most_ranks_per_node(distinct);
}

}  // namespace fwi
