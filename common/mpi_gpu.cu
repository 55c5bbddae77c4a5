// select_gpu_for_rank (declared in mpi_env.hpp): one GPU per MPI rank, chosen among the GPUs each rank of
// the node sees.
#include <cuda_runtime.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "cuda_check.hpp"
#include "device.hpp"
#include "errors.hpp"
#include "mpi_check.hpp"
#include "mpi_env.hpp"
#include "output.hpp"

namespace fwi {

namespace {

using BusId = std::array<char, 32>;  // "0000:1B:00.0", NUL-terminated
constexpr int kMostGpusSeen = 64;    // the GPUs of one rank that select_gpu_for_rank chooses from

std::string ranks_text(const std::vector<int>& ranks) {  // "0,1"
    std::vector<std::string> parts;
    for (const int rank : ranks) parts.push_back(std::to_string(rank));
    return join(parts, ",");
}

// What the ranks of this rank's node see, gathered from all of them (collective over `comm`).
struct NodeGpus {
    NodeLocalRank local;                            // this rank's place among them
    std::vector<std::vector<std::string>> visible;  // each rank's GPUs, by PCI bus id, in its CUDA order
    std::vector<unsigned> job_processes;            // their process ids: a rank of this job is no "other process"
};

NodeGpus gather_node_gpus(MPI_Comm comm, int gpus) {
    // Every rank of the node says which GPUs it sees, by bus id: a launcher may show each rank another set.
    // (Up to kMostGpusSeen of them, the rest of the array left empty: no node has more.)
    std::vector<BusId> mine(kMostGpusSeen, BusId{});
    for (int d = 0; d < std::min(gpus, kMostGpusSeen); ++d)
        CUDA_CHECK(cudaDeviceGetPCIBusId(mine[size_t(d)].data(), int(BusId().size()), d));
    MPI_Comm node_comm = node_local_communicator(comm);
    NodeGpus node;
    NodeLocalRank& local = node.local;
    MPI_CHECK(MPI_Comm_rank(node_comm, &local.rank));
    MPI_CHECK(MPI_Comm_size(node_comm, &local.size));
    std::vector<BusId> all(mine.size() * size_t(local.size));
    const int bytes = int(mine.size() * sizeof(BusId));
    int gathered = MPI_Allgather(mine.data(), bytes, MPI_CHAR, all.data(), bytes, MPI_CHAR, node_comm);
    // The node's ranks' process ids too: a rank of this job on the same GPU is not "another process".
    const unsigned my_pid = static_cast<unsigned>(getpid());
    node.job_processes.resize(size_t(local.size));
    if (gathered == MPI_SUCCESS)
        gathered = MPI_Allgather(&my_pid, 1, MPI_UNSIGNED, node.job_processes.data(), 1, MPI_UNSIGNED, node_comm);
    const int freed = MPI_Comm_free(&node_comm);
    MPI_CHECK(gathered);
    MPI_CHECK(freed);
    node.visible.resize(size_t(local.size));
    for (size_t i = 0; i < all.size(); ++i)
        if (all[i][0] != '\0') node.visible[i / mine.size()].emplace_back(all[i].data());
    return node;
}

}  // namespace

int select_gpu_for_rank(MPI_Comm comm, GpuSharing sharing, double timeout_s) {
    const WaitTimeout guard("the other ranks' GPU selection", timeout_s);
    int rank = 0;
    MPI_CHECK(MPI_Comm_rank(comm, &rank));
    const int gpus = visible_gpu_count();
    if (gpus == 0)
        throw EnvironmentError(
            "rank " + std::to_string(rank) + " on host " + mpi_processor_name() +
            " sees no CUDA GPU (check nvidia-smi, CUDA_VISIBLE_DEVICES and the launcher's GPU binding)");
    const NodeGpus node = gather_node_gpus(comm, gpus);
    const NodeLocalRank& local = node.local;
    const std::vector<int> chosen = choose_gpus_on_node(node.visible);
    const int device = chosen[size_t(local.rank)];

    // Every rank has one (a rank that sees no GPU stops above, before the collective).
    std::vector<std::string> bus_ids;
    for (int r = 0; r < local.size; ++r) bus_ids.push_back(node.visible[size_t(r)][size_t(chosen[size_t(r)])]);
    const GpusOnNode on_node = gpus_on_node(bus_ids, local.rank);
    if (on_node.distinct < local.size && sharing == GpuSharing::refuse) {
        // Ranks on instances of one MIG-mode GPU land here too: the instances share the GPU's PCI address.
        const bool mig = Nvml().in_mig_mode(gpu_pci_address(device));
        throw EnvironmentError(one_gpu_per_rank_refusal(local.size, mpi_processor_name(), on_node.distinct) +
                               (mig ? " (GPU " + std::to_string(device) +
                                          " is in MIG mode: its instances share its PCI address, and "
                                          "NCCL does not run between them; the multi-GPU programs need whole GPUs)"
                                    : std::string()));
    }
    const bool shared = on_node.sharing_mine.size() > 1;
    const std::string shared_gpu = ranks_sharing_gpus(local.size, mpi_processor_name(), on_node.distinct) +
                                   "; node-local ranks " + ranks_text(on_node.sharing_mine) + " share GPU " +
                                   std::to_string(device) + " (" + bus_ids[size_t(local.rank)] + ")";
    // In exclusive-process mode every rank that shares a GPU is refused, before cudaSetDevice: there all but
    // one of them would fail with a bare cudaErrorDevicesUnavailable.
    if (shared && gpu_takes_one_process(device))
        throw GpuUnavailableError(shared_gpu + ", whose compute mode is exclusive-process: one process at a time; " +
                                  at_most_ranks_per_node(on_node.distinct));
    // The first of the ranks on a GPU says so for all of them.
    if (shared && on_node.sharing_mine.front() == local.rank)
        print_warning(shared_gpu + ", so timings are not those of one rank per GPU");
    // The warning's program name says which rank this is.
    warn_of_other_processes(device, 1, node.job_processes, "on host " + mpi_processor_name() + ", ");
    try {
        CUDA_CHECK(cudaSetDevice(device));  // where it makes the context: another process may hold the GPU
    } catch (const DeviceMemoryError&) {
        throw;
    } catch (const EnvironmentError& error) {
        throw GpuUnavailableError(error.what());
    }
    return device;
}

int print_rank_placement(int device, const std::string& suffix, double timeout_s) {
    const std::string bus_id = gpu_pci_address(device).bus_id;
    const std::string host = mpi_processor_name();
    const std::string line = "rank " + std::to_string(world_rank()) + " on " + host + ": GPU " +
                             std::to_string(device) + ", " + describe_device(device) + " [" + bus_id + "]" + suffix;
    for (const std::string& rank_line : gather_on_rank0(line, "the other ranks' placement", timeout_s))
        std::printf("  %s\n", rank_line.c_str());
    std::fflush(stdout);
    const std::vector<std::string> gpus = gather_on_rank0(host + "/" + bus_id, "the other ranks' placement", timeout_s);
    int distinct = static_cast<int>(std::set<std::string>(gpus.begin(), gpus.end()).size());  // rank 0's count
    const WaitTimeout guard("rank 0's count of the GPUs", timeout_s);
    MPI_CHECK(MPI_Bcast(&distinct, 1, MPI_INT, 0, MPI_COMM_WORLD));
    return distinct;
}

}  // namespace fwi
