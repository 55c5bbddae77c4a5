// Running an MPI program: start-up and shutdown, errors that end the whole job instead of leaving
// ranks waiting, the node-local rank, and one GPU per rank.
#pragma once

#include <mpi.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "launch_env.hpp"

namespace fwi {

// Runs an MPI program: MPI_Init, MPI_ERRORS_RETURN on MPI_COMM_WORLD, the body, MPI_Finalize. An exception
// on any rank is printed once, prefixed "name (rank r): ", and ends the whole job with MPI_Abort with the
// error kind's exit code (2 usage, 3 environment, 1 verification), so no rank is left waiting. An MPI
// without MPI_THREAD_FUNNELED or MPI_ERRORS_RETURN ends it with exit 3. MPI_Finalize is guarded as a
// wait on the other ranks, for a minute (kFinalizeLimitSeconds): a program whose ranks end far apart
// meets in a barrier first (wait_for_rank0_to_finish).
// Before the body, every rank must have been given the same program and arguments (else a UsageError
// on every rank: ranks that parse different runs would wait for each other forever), and, unless --help
// is asked for, the launch is checked: see launch_mismatch.
constexpr double kFinalizeLimitSeconds = 60.0;
// MPI_Init, which meets the other ranks, has as long as this: past it, the process ends with exit 3 and a
// message naming the usual causes (no route between the nodes).
constexpr double kStartLimitSeconds = 300.0;
int run_mpi_program(const char* name, int argc, char** argv, const std::function<int()>& body);
// For a program whose ranks may reach MPI_Finalize long apart without a failure (doctor, whose rank 0 may
// still wait out a check's limit on a rank that has finished): how long MPI_Finalize waits.
void set_finalize_limit(double seconds);

// Guards a blocking MPI call that waits on other ranks (a collective, a barrier), which MPI itself
// cannot time out: if the guard still exists `timeout_s` after it was made, this process prints
// "name (rank r): environment: no progress for T s waiting for <what> (<likely cause>)" on stderr and
// exits with code 3, and mpirun then ends the other ranks. The likely cause is by default another rank;
// a guard around something else (files being written) names its own. Cheap enough to wrap every call
// (a watcher thread started once checks the deadline). Guards nest: the innermost one's deadline applies
// until it ends, then the enclosing one's again.
constexpr const char* kAnotherRankCause =
    "another rank failed, hung or is much slower; raise --timeout if it is only slow";
constexpr const char* kFileSystemCause = "the file system is stalled or very slow; raise --timeout if it is only slow";
class WaitTimeout {
public:
    WaitTimeout(std::string what, double timeout_s, std::string likely_cause = kAnotherRankCause);
    ~WaitTimeout();
    WaitTimeout(const WaitTimeout&) = delete;
    WaitTimeout& operator=(const WaitTimeout&) = delete;
    struct State;  // what a guard watches (mpi_env.cpp)

private:
    std::unique_ptr<State> enclosing_;  // what the enclosing guard (if any) watched, restored at the end
};

// MPI_Barrier on `comm` under a WaitTimeout naming `what`.
void barrier_with_timeout(MPI_Comm comm, const std::string& what, double timeout_s);

// The last wait of an FWI lesson over MPI (03, 05, 06), when a rank's part is done: rank 0 still runs the
// single-GPU reference and reports; without this the other ranks would wait for it in MPI_Finalize, whose
// guard allows only a minute. A barrier of every rank whose limit is timeout_s plus member0_allowance
// (team.hpp: 3 x ranks x `run_seconds`, how long the parallel run took on this rank; none on rank 0). The
// first such wait, for rank 0's set-up, is MpiTeam::wait_for_member0_setup.
void wait_for_rank0_to_finish(double run_seconds, double timeout_s);

int world_rank();
int world_size();
// The name MPI gives this rank's node (MPI_Get_processor_name), as the launcher's host lists name it.
std::string mpi_processor_name();

// Every rank's `text`, gathered on rank 0 in rank order (empty on the other ranks), under a WaitTimeout
// naming `what`: how rank 0 prints a line for each rank. Texts may differ in length.
std::vector<std::string> gather_on_rank0(const std::string& text, const std::string& what, double timeout_s);

// The ranks of `comm` on this node, as a new communicator (MPI_Comm_split_type, MPI_COMM_TYPE_SHARED),
// ordered by their rank in `comm`; the caller frees it with MPI_Comm_free.
// For tests on one machine only: FWI_TEST_NODE_OF_RANK=n0,n1,... (one non-negative integer per rank of
// `comm`) puts rank r on fake node n_r instead, so that a CPU test can place ranks on several nodes the
// way a launcher does (tests/test_node_local_rank.cpp). A list that does not fit `comm` is a UsageError
// naming the variable, on every rank alike.
MPI_Comm node_local_communicator(MPI_Comm comm);

// This rank's place among the ranks of `comm` on the same node.
struct NodeLocalRank {
    int rank = 0;
    int size = 1;
};
NodeLocalRank node_local_rank(MPI_Comm comm);

// How many ranks of MPI_COMM_WORLD run on this node (node_local_rank's size), waited for under a
// WaitTimeout: what require_host_memory needs to know, as each rank holds the observed traces.
int ranks_on_this_node(double timeout_s);

// The GPU each rank of a node drives, as an index into the GPUs that rank sees (visible[r]: node-local rank
// r's GPUs, as PCI bus ids in CUDA's order). As many ranks as possible get a GPU of their own: in
// node-local rank order, each takes the first free GPU it sees, or else one a rank before it can give up
// for another free one it sees. Ranks left over (more ranks than GPUs) share, each taking the GPU it sees
// that the fewest ranks use. So ranks that all see all the node's GPUs take GPUs 0, 1, ... in turn (a
// fifth rank on 4 GPUs shares GPU 0), however the launcher spread the ranks over the nodes; a rank that
// sees one GPU (a launcher's CUDA_VISIBLE_DEVICES per task) takes it; and ranks that see overlapping sets
// (Slurm's --gpu-bind=closest shows local tasks 0 and 2 one socket's GPUs, 1 and 3 the other's) each get
// a GPU of their own whenever the sets allow it. A rank that sees no GPU gets -1.
std::vector<int> choose_gpus_on_node(const std::vector<std::vector<std::string>>& visible);

enum class GpuSharing { warn, refuse };

// What the PCI bus ids of a node's ranks' GPUs say (bus_ids[r]: node-local rank r's): how many distinct
// GPUs they drive, and which node-local ranks share `local_rank`'s GPU, itself included.
struct GpusOnNode {
    int distinct = 0;
    std::vector<int> sharing_mine;
};
GpusOnNode gpus_on_node(const std::vector<std::string>& bus_ids, int local_rank);
// "5 ranks on host node-a share 4 GPUs": the start of the refusal and of the warning.
std::string ranks_sharing_gpus(int ranks, const std::string& host, int distinct);
// "start at most 4 ranks per node (mpirun -np N --map-by ppr:4:node)", on nodes of `gpus` GPUs each.
std::string at_most_ranks_per_node(int gpus);
// The refusal when `ranks` ranks on `host` share `distinct` GPUs, for a program that needs one GPU per
// rank: how many ranks to start instead.
std::string one_gpu_per_rank_refusal(int ranks, const std::string& host, int distinct);

// cudaSetDevice(the GPU choose_gpus_on_node gives this rank) and returns the device; warns first of other
// processes on that GPU (warn_of_other_processes). No visible GPU: EnvironmentError naming the rank and
// host. More local ranks than GPUs: a warning on stderr (warn) or EnvironmentError (refuse). A GPU that cannot
// be taken: GpuUnavailableError, on the ranks that share one in exclusive-process compute mode, or where
// cudaSetDevice fails (another process holds it), but DeviceMemoryError where it has no memory left for a
// context; all of them come after every collective of the selection.
// Sharing is judged by the GPUs' PCI bus ids, so a launcher that gives each rank its own
// CUDA_VISIBLE_DEVICES (every rank sees "device 0") is not mistaken for sharing. Collective over `comm`,
// under a WaitTimeout of `timeout_s`: a rank that never gets there (a GPU that hangs in CUDA's start, a
// stopped process) ends the job with exit 3.
// (Declared here, implemented in common/mpi_gpu.cu in fwi_mpi_gpu: a library = fwi_mpi + fwi_gpu.)
int select_gpu_for_rank(MPI_Comm comm, GpuSharing sharing, double timeout_s);

// Where every rank of MPI_COMM_WORLD runs, printed by rank 0 one line per rank, e.g.
//   "  rank 1 on node2: GPU 1, NVIDIA H100 80GB HBM3 (sm_90, 132 SMs, 79.2 GiB) [0000:1B:00.0], shots 2..3"
// (`suffix` ends the line), gathered under a WaitTimeout of `timeout_s`. Returns, on every rank, how many
// distinct GPUs the ranks use: one host and PCI bus id is one GPU, however the launcher numbered it.
// (Implemented in common/mpi_gpu.cu, as select_gpu_for_rank.)
int print_rank_placement(int device, const std::string& suffix, double timeout_s);

}  // namespace fwi
