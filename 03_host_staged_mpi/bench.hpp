// --bench-allreduce: the combine step alone over a sweep of sizes, per variant, in 02's table.
#pragma once

#include <string>
#include <vector>

#include "variants.hpp"

namespace fwi {

struct BenchSettings {
    int min_bytes = 4096;
    int max_bytes = 512 << 20;
    double step_factor = 2.0;
    int warmup = 3;    // untimed combines per size
    int repeats = 10;  // timed combines per size; the median is reported
};

// Collective over MPI_COMM_WORLD; every rank has selected its GPU. `gpus` is the number of distinct GPUs
// the ranks use. Returns the exit code (1 when an element was wrong).
int run_bench_allreduce(const std::vector<VariantSpec>& specs, const BenchSettings& settings, int gpus,
                        double timeout_s, const std::string& json_path);

}  // namespace fwi
