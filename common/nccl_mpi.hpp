// NCCL bootstrapped over MPI: one process per GPU, MPI only carries the 128-byte ncclUniqueId.
#pragma once

#include <mpi.h>
#include <nccl.h>

namespace fwi {

// Creates an NCCL communicator (made as nccl_comm.hpp says) over the ranks of `comm` (NCCL rank = rank in `comm`), on
// the current device: the caller selects its GPU first (select_gpu_for_rank in mpi_env.hpp). Rank 0 calls
// ncclGetUniqueId, MPI_Bcast sends it to every rank, an MPI_Barrier lines the ranks up (both under a
// WaitTimeout: exit 3 when a rank does not come within `ranks_timeout_s`), and every rank calls
// nccl_init_rank with `init_timeout_s`. Where rank 0 cannot make the id, every rank throws after the
// MPI_Bcast (rank 0 NCCL's reason), so that all of them meet at the caller's next collective. Collective over `comm`.
// The lessons pass --timeout for both limits; doctor passes two, as its watchdog must report a rank that never comes
// before the WaitTimeout ends the process.
ncclComm_t nccl_bootstrap_over_mpi(MPI_Comm comm, double ranks_timeout_s, double init_timeout_s);

}  // namespace fwi
