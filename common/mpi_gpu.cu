// select_gpu_for_rank (declared in mpi_env.hpp): one GPU per MPI rank from the node-local rank.
#include <cuda_runtime.h>

#include <array>
#include <cstdio>
#include <string>
#include <vector>

#include "cuda_check.hpp"
#include "device.hpp"
#include "errors.hpp"
#include "mpi_check.hpp"
#include "mpi_env.hpp"

namespace fwi {

namespace {

using BusId = std::array<char, 32>;  // "0000:1B:00.0", NUL-terminated

std::string join(const std::vector<int>& values) {
    std::string text;
    for (const int value : values) text += (text.empty() ? "" : ",") + std::to_string(value);
    return text;
}

}  // namespace

int select_gpu_for_rank(MPI_Comm comm, GpuSharing sharing, double timeout_s) {
    const WaitTimeout guard("the other ranks' GPU selection", timeout_s);
    const NodeLocalRank local = node_local_rank(comm);
    int rank = 0;
    MPI_CHECK(MPI_Comm_rank(comm, &rank));
    const int gpus = visible_gpu_count();
    if (gpus == 0)
        throw EnvironmentError(
            "rank " + std::to_string(rank) + " on host " + mpi_processor_name() +
            " sees no CUDA GPU (check nvidia-smi, CUDA_VISIBLE_DEVICES and the launcher's GPU binding)");
    const int device = gpu_for_local_rank(local.rank, gpus);
    CUDA_CHECK(cudaSetDevice(device));

    BusId mine{};
    CUDA_CHECK(cudaDeviceGetPCIBusId(mine.data(), int(mine.size()), device));
    MPI_Comm node_comm = node_local_communicator(comm);
    std::vector<BusId> all(local.size);
    const int gathered =
        MPI_Allgather(mine.data(), int(mine.size()), MPI_CHAR, all.data(), int(mine.size()), MPI_CHAR, node_comm);
    MPI_Comm_free(&node_comm);
    MPI_CHECK(gathered);

    std::vector<int> sharing_mine;  // node-local ranks on this rank's GPU, this one included
    int distinct = 0;
    for (int r = 0; r < local.size; ++r) {
        if (all[r] == mine) sharing_mine.push_back(r);
        bool first_with_this_gpu = true;
        for (int q = 0; q < r; ++q) first_with_this_gpu = first_with_this_gpu && all[q] != all[r];
        distinct += first_with_this_gpu;
    }
    if (distinct == local.size) return device;

    const std::string what = std::to_string(local.size) + " ranks on host " + mpi_processor_name() + " share " +
                             std::to_string(distinct) + " GPU" + (distinct > 1 ? "s" : "");
    if (sharing == GpuSharing::refuse)
        throw EnvironmentError(what + "; this program needs one GPU per rank: start at most " +
                               std::to_string(distinct) + (distinct > 1 ? " ranks" : " rank") +
                               " per node (mpirun -np N --map-by ppr:" + std::to_string(distinct) + ":node)");
    if (sharing_mine.front() == local.rank && sharing_mine.size() > 1)
        print_warning(what + "; node-local ranks " + join(sharing_mine) + " share GPU " + std::to_string(device) +
                      " (" + mine.data() + "), so timings are not those of one rank per GPU");
    return device;
}

}  // namespace fwi
