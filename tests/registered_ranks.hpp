// The rank count an MPI test is registered with (`--ranks=N` on its command line; doctest ignores the
// flag). A launcher that does not match the MPI library the test was built against starts every process
// as a job of its own, of world size 1, and each would then pass on its own input alone: the count is
// checked before any test runs.
#pragma once

#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

// True when --ranks=N is absent or N is MPI_COMM_WORLD's size; otherwise says so on stderr.
inline bool world_has_registered_ranks(int argc, char** argv) {
    const char* flag = "--ranks=";
    for (int i = 1; i < argc; ++i) {
        if (std::strncmp(argv[i], flag, std::strlen(flag)) != 0) continue;
        const int registered = std::atoi(argv[i] + std::strlen(flag));
        int size = 0;
        MPI_Comm_size(MPI_COMM_WORLD, &size);
        if (size == registered) return true;
        std::fprintf(stderr,
                     "%s: MPI_COMM_WORLD has %d rank(s), but the test is registered for %d: the launcher did not start "
                     "one MPI job (an mpirun of another MPI library than the one built against?)\n",
                     argv[0], size, registered);
        return false;
    }
    return true;
}
