// --bench-allreduce: the combine alone, in place on this rank's GPU, over the sizes of the allreduce sweep
// that 02 and 05 share (common/allreduce_sweep.hpp): per variant a table and a RESULT, then a summary.
#pragma once

#include <string>
#include <vector>

#include "allreduce_sweep.hpp"
#include "variants.hpp"

namespace fwi {

// Collective over MPI_COMM_WORLD; every rank has selected its GPU. `gpus` is the number of distinct GPUs
// the ranks use. Returns the exit code; throws VerificationError when an element was wrong.
int run_bench_allreduce(const std::vector<VariantSpec>& specs, const AllreduceSweepOptions& options, int gpus,
                        double timeout_s, const std::string& json_path);

}  // namespace fwi
