#include "nccl_mpi.hpp"

#include <exception>

#include "errors.hpp"
#include "mpi_check.hpp"
#include "mpi_env.hpp"
#include "nccl_comm.hpp"

namespace fwi {

ncclComm_t nccl_bootstrap_over_mpi(MPI_Comm comm, double ranks_timeout_s, double init_timeout_s) {
    int rank = 0, size = 1;
    MPI_CHECK(MPI_Comm_rank(comm, &rank));
    MPI_CHECK(MPI_Comm_size(comm, &size));
    // The id names rank 0's bootstrap socket: the only thing that must travel before NCCL can connect.
    // Rank 0 sends whether it could make one beside it (ncclGetUniqueId fails where NCCL_SOCKET_IFNAME
    // names no interface of the node), so that every rank fails here together: a rank 0 that failed alone
    // would leave the others waiting in MPI_Bcast while it went on to another collective (doctor's
    // agreement on its outcome).
    struct {
        ncclUniqueId id;
        int made;
    } message{};
    std::exception_ptr rank0_failure;
    if (rank == 0) {
        try {
            message.id = nccl_unique_id();
            message.made = 1;
        } catch (...) {
            rank0_failure = std::current_exception();
        }
    }
    {
        // A rank that fails before this point ends the job through MPI_Abort while the others wait here
        // in MPI, rather than inside NCCL's init; one that never comes (stopped, hung in its set-up) ends
        // it through this guard. The wait includes what the ranks did before it since their last meeting
        // (in the FWI lessons, the team's wait_for_member0_setup: rank 0's longer set-up is not counted here), or their
        // whole set-up (05's --bench-allreduce: a slow CUDA start on another node).
        const WaitTimeout guard("the other ranks before NCCL's init (rank 0's NCCL id)", ranks_timeout_s);
        MPI_CHECK(MPI_Bcast(&message, sizeof(message), MPI_BYTE, 0, comm));
        // Line the ranks up before the timed init: MPI_Bcast may return on rank 0 before the others have
        // the id, and a rank still busy would count against the others' --timeout.
        MPI_CHECK(MPI_Barrier(comm));
    }
    if (rank0_failure) std::rethrow_exception(rank0_failure);
    if (!message.made)
        throw EnvironmentError("rank 0 could not make NCCL's id (ncclGetUniqueId; rank 0's message says why)");
    return nccl_init_rank(size, message.id, rank, init_timeout_s);
}

}  // namespace fwi
