// main() of the doctest programs that run under mpirun (one process per rank): MPI around the tests,
// with MPI errors returned to the caller so that MPI_CHECK sees their codes, after a check that the job
// has the ranks the test is registered for (registered_ranks.hpp).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <mpi.h>

#include "registered_ranks.hpp"

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (!world_has_registered_ranks(argc, argv)) {
        MPI_Finalize();
        return 1;
    }
    doctest::Context context(argc, argv);
    const int result = context.run();
    MPI_Finalize();
    return result;
}
