// The harness: run a variant at one size, check it, time it, and print nccl-tests' table.
#pragma once

#include <cstddef>
#include <string>

#include "allreduce_variant.hpp"
#include "gpu_group.hpp"

namespace fwi {

struct TimingOptions {
    int warmup = 5;    // untimed allreduces before timing
    int iters = 20;    // allreduces per timed batch (fewer for huge sizes)
    int repeats = 5;   // timed batches; the median is reported
};

struct Measurement {
    size_t count = 0;
    double seconds = 0.0;  // median time of one allreduce
    long long wrong = 0;   // wrong elements over all GPUs: after one run into poisoned buffers + after timing
    std::string algorithm;
};

// Allreduces in one timed batch of `bytes`: `iters`, fewer when a batch would move more than 1 GiB.
int iterations_for(size_t bytes, int iters);

// One allreduce into poisoned receive buffers; returns the wrong elements.
long long run_once_and_count_wrong(AllreduceVariant& variant, GpuGroup& group, size_t count);

// Time of one allreduce from a batch of `iters` back to back, timed with events on GPU 0.
double time_batch(AllreduceVariant& variant, GpuGroup& group, size_t count, int iters);

// Checks, warms up and times the variant at `count` floats.
Measurement measure(AllreduceVariant& variant, GpuGroup& group, size_t count, const TimingOptions& options);

void print_table_header(const AllreduceVariant& variant);
// `note` goes at the end of the row (the algorithm chosen, the FWI gradient marker).
void print_table_row(const Measurement& measurement, int ranks, const std::string& note);

}  // namespace fwi
