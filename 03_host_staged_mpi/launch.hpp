// 03's launch: its options, the checks before a run, and where each rank runs. Everything of the
// program that is not the pattern itself (main.cpp) or the combine variants' plumbing.
#pragma once

#include <string>
#include <vector>

#include "bench.hpp"
#include "problem.hpp"
#include "shot_parallel.hpp"
#include "variants.hpp"

namespace fwi {

struct Options : ShotParallelOptions {
    std::string combine = "all", chunk_kb = "1024", in_flight = "1";
    bool bench = false, skip_without_gpus = false;
    AllreduceSweepOptions sweep;
};

// Parses the flags (false after --help) and validates the problem, and that it fits in host memory.
bool parse_options(int argc, char** argv, Problem& problem, Options& o);

// A variant named in --combine that cannot run here is an error; "all" skips it with a line.
void require_named_variants_available(const Options& o, const std::vector<VariantSpec>& specs);

// True on every rank when some node has more ranks than visible GPUs.
bool too_few_gpus_anywhere(double timeout_s);

// Rank 0, after the variants: one line each, from their RESULT objects' figures.
struct VariantLine {
    std::string label;
    bool skipped = false, verified = false;
    double per_gradient_s = 0.0, combine_s = 0.0, to_host_s = 0.0, mpi_s = 0.0, to_device_s = 0.0;
    double combine_share = 0.0;  // of an iteration
};
void print_variant_table(const std::vector<VariantLine>& lines, size_t gradient_bytes, int ranks, int iterations);

}  // namespace fwi
