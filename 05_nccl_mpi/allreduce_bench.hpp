// --bench-allreduce: ncclAllReduce with one process per GPU over the allreduce sweep that 02 and 03 share
// (common/allreduce_sweep.hpp): the same sizes, table and RESULT, so the layouts compare row by row.
#pragma once

#include <nccl.h>

#include <string>

#include "allreduce_sweep.hpp"
#include "test_fault.hpp"

namespace fwi {

// Sweeps the sizes over `comm` (rank `rank` of `ranks`, on the current device); rank 0 prints the table
// and the RESULT. The ranks line up and combine their times and #wrong through NCCL itself: after the
// bootstrap no blocking MPI call, which a dead rank would leave waiting. Returns the wrong elements over
// all ranks and sizes (the same on every rank). `fault` (the fault tests, test_fault.hpp): its allreduce
// point is just before the sweep's first timed batch.
long long run_bench_allreduce(ncclComm_t comm, int rank, int ranks, const AllreduceSweepOptions& options,
                              double timeout_s, const std::string& json_path, const TestFault& fault);

}  // namespace fwi
