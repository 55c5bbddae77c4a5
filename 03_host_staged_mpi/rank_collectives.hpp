// Small collectives over MPI_COMM_WORLD for the report, each under a WaitTimeout.
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

#include "mpi_check.hpp"
#include "mpi_env.hpp"

namespace fwi {

// Element-wise op (MPI_MAX, MPI_SUM, ...) over the ranks, the result on every rank.
inline void reduce_over_ranks(std::vector<double>& values, MPI_Op op, const std::string& what, double timeout_s) {
    WaitTimeout guard(what, timeout_s);
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, values.data(), int(values.size()), MPI_DOUBLE, op, MPI_COMM_WORLD));
}

inline double reduce_over_ranks(double value, MPI_Op op, const std::string& what, double timeout_s) {
    std::vector<double> values{value};
    reduce_over_ranks(values, op, what, timeout_s);
    return values[0];
}

}  // namespace fwi
