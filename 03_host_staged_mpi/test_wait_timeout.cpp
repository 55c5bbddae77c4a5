// WaitTimeout (common/mpi_env.hpp), run under mpirun with 2 ranks.
//
// Without an argument: a thousand guarded barriers (300 s each) that finish in time pass silently. Then an
// outer guard of 2 s encloses a hundred more of them; after they end, its own deadline must apply again,
// earlier than theirs: rank 1 reaches the next barrier 30 s late, and the job must end within seconds with
// exit code 3 and a message naming what rank 0 waited for (CTest checks the code, the message and a 25 s
// limit).
//
// With `rank0 S`: the end of an FWI lesson, wait_for_rank0_to_finish after a "run" of 1 s and with a
// --timeout of 1 s, so a limit of 3 x 2 ranks x 1 s + 1 s = 7 s, while rank 0 takes S seconds for its
// reference. S = 1 must end with exit 0; S = 30 with exit 3 and the message, long before rank 0 is done.
// With `setup S`: the start, MpiTeam::wait_for_member0_setup after a set-up of 1 s, the same limit, rank 0's
// set-up taking S seconds: 5 s (longer than the --timeout alone) must pass, 30 s must not.
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>

#include "errors.hpp"
#include "mpi_check.hpp"
#include "mpi_env.hpp"
#include "mpi_team.hpp"

using namespace fwi;

namespace {

void nested_guards() {
    for (int i = 0; i < 1000; ++i) barrier_with_timeout(MPI_COMM_WORLD, "a barrier in time", 300.0);
    if (world_rank() == 0) std::printf("1000 guarded barriers in time: passed\n");
    WaitTimeout outer("a barrier rank 1 reaches 30 s late", 2.0);
    for (int i = 0; i < 100; ++i) barrier_with_timeout(MPI_COMM_WORLD, "a nested barrier in time", 300.0);
    if (world_rank() == 1) std::this_thread::sleep_for(std::chrono::seconds(30));
    MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
}

// Rank 0 takes `seconds` before the wait for it (the "own" part of the others: 1 s, --timeout 1 s).
void rank0_late_for(const std::function<void(double own_seconds, double timeout_s)>& wait_for_rank0, const char* what,
                    int seconds) {
    if (world_rank() == 0) std::this_thread::sleep_for(std::chrono::seconds(seconds));
    wait_for_rank0(1.0, 1.0);
    if (world_rank() == 0) std::printf("every rank waited for rank 0's %d s%s\n", seconds, what);
}

void wait_for_rank0_setup(double setup_seconds, double timeout_s) {
    MpiTeam(MPI_COMM_WORLD, timeout_s).wait_for_member0_setup(world_rank(), setup_seconds);
}

}  // namespace

int main(int argc, char** argv) {
    return run_mpi_program("test_wait_timeout", argc, argv, [&] {
        // A launcher of another MPI library starts each process as a job of one rank, whose waits end at once.
        if (world_size() != 2)
            throw EnvironmentError("needs one MPI job of 2 ranks, not " + std::to_string(world_size()) +
                                   " (a launcher of another MPI library than the one built against?)");
        if (argc == 3 && std::string(argv[1]) == "rank0")
            rank0_late_for(wait_for_rank0_to_finish, "", std::stoi(argv[2]));
        else if (argc == 3 && std::string(argv[1]) == "setup")
            rank0_late_for(wait_for_rank0_setup, " set-up", std::stoi(argv[2]));
        else
            nested_guards();
        return 0;
    });
}
