// WaitTimeout (common/mpi_env.hpp), run under mpirun with 2 ranks. A thousand guarded barriers (300 s
// each) that finish in time pass silently. Then an outer guard of 2 s encloses a hundred more of them;
// after they end, its own deadline must apply again, earlier than theirs: rank 1 reaches the next barrier
// 30 s late, and the job must end within seconds with exit code 3 and a message naming what rank 0 waited
// for (CTest checks the code, the message and a 25 s limit).
#include <chrono>
#include <cstdio>
#include <thread>

#include "mpi_check.hpp"
#include "mpi_env.hpp"

using namespace fwi;

int main(int argc, char** argv) {
    return run_mpi_program("test_wait_timeout", argc, argv, [] {
        for (int i = 0; i < 1000; ++i) barrier_with_timeout(MPI_COMM_WORLD, "a barrier in time", 300.0);
        if (world_rank() == 0) std::printf("1000 guarded barriers in time: passed\n");
        WaitTimeout outer("a barrier rank 1 reaches 30 s late", 2.0);
        for (int i = 0; i < 100; ++i) barrier_with_timeout(MPI_COMM_WORLD, "a nested barrier in time", 300.0);
        if (world_rank() == 1) std::this_thread::sleep_for(std::chrono::seconds(30));
        MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
        return 0;
    });
}
