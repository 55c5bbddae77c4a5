// --bench-allreduce: ncclAllReduce over a sweep of sizes with one process per GPU, in 02's table
// (nccl-tests' algbw / busbw / #wrong), so the two layouts compare row by row.
#pragma once

#include <nccl.h>

#include <string>

#include "cli.hpp"

namespace fwi {

struct BenchOptions {
    int min_bytes = 8;
    int max_bytes = 256 << 20;
    double step_factor = 2.0;
    int warmup = 5;    // untimed allreduces per size before timing
    int iters = 20;    // allreduces per timed batch (fewer when a batch would move more than 1 GiB)
    int repeats = 5;   // timed batches per size; the median is reported
};

// --min-bytes, --max-bytes, --step-factor, --warmup, --iters, --repeats (02's names and defaults)
void add_bench_flags(ArgParser& parser, BenchOptions& options);
// Cross-flag checks: throws UsageError.
void validate_bench_options(const BenchOptions& options);

// Sweeps the sizes over `comm` (rank `rank` of `ranks`, on the current device). Each size: one checked
// allreduce into a poisoned output, a warm-up, `repeats` timed batches of back-to-back allreduces (CUDA
// events on each rank; rank 0's median is reported), and a second check after them. Rank 0 prints the
// table and the RESULT line. Returns the wrong elements over all ranks and sizes (the same on every rank).
long long run_allreduce_bench(ncclComm_t comm, int rank, int ranks, const BenchOptions& options, double timeout_s,
                              const std::string& json_path);

}  // namespace fwi
