// NCCL bootstrapped over MPI (common/nccl_mpi.hpp) where rank 0 cannot make NCCL's id, on one machine and
// without a GPU: NCCL_SOCKET_IFNAME naming no interface of the node makes ncclGetUniqueId fail before any
// GPU is touched. Every rank must fail in the bootstrap together, rank 0 with NCCL's reason, and then still
// be in step with the others (a rank 0 that failed alone once went on to another collective while the
// others waited in MPI_Bcast). And what a failure says of NCCL's last warning.
#include <doctest/doctest.h>
#include <mpi.h>

#include <cstdlib>
#include <string>
#include <thread>

#include "errors.hpp"
#include "mpi_check.hpp"
#include "mpi_env.hpp"
#include "nccl_check.hpp"
#include "nccl_mpi.hpp"

using namespace fwi;

TEST_CASE("a rank 0 that cannot make NCCL's id fails the bootstrap on every rank, naming why") {
    const char* interface = std::getenv("NCCL_SOCKET_IFNAME");
    REQUIRE_MESSAGE(interface != nullptr, "the test is run with NCCL_SOCKET_IFNAME naming no interface");
    std::string message;
    try {
        nccl_bootstrap_over_mpi(MPI_COMM_WORLD, 20.0, 20.0);
    } catch (const EnvironmentError& error) {
        message = error.what();
    }
    if (world_rank() == 0) {
        CHECK(message.find("ncclGetUniqueId") != std::string::npos);
        CHECK(message.find("no socket interface") != std::string::npos);       // NCCL's own reason, not only its code
        CHECK(message.find("failed at nccl_comm.cpp:") != std::string::npos);  // the file's name, not its path
    } else {
        CHECK(message.find("rank 0 could not make NCCL's id") != std::string::npos);
    }
    // Every rank is still in step: this barrier is the next collective of all of them.
    barrier_with_timeout(MPI_COMM_WORLD, "the ranks after the failed bootstrap", 20.0);
}

// NCCL keeps one last warning for the whole process and never clears it: a failure after a success must not
// be blamed on the warning that was there before the success.
TEST_CASE("a failure names NCCL's last warning only where it came after the latest success") {
    ncclUniqueId id;
    const ncclResult_t status = ncclGetUniqueId(&id);
    REQUIRE(status != ncclSuccess);
    CHECK(nccl_error_text(status).find("no socket interface") != std::string::npos);
    // A success on another thread (another GPU's, in 04) does not hide this thread's warning.
    std::thread([] { nccl_warnings_so_far_succeeded(); }).join();
    CHECK(nccl_error_text(status).find("no socket interface") != std::string::npos);
    nccl_warnings_so_far_succeeded();  // what a wait that ended well does
    CHECK(nccl_error_text(status) == ncclGetErrorString(status));
    // A thread started after that success starts from it: the warning is old there too.
    std::string on_a_new_thread;
    std::thread([&] { on_a_new_thread = nccl_error_text(status); }).join();
    CHECK(on_a_new_thread == ncclGetErrorString(status));
}
