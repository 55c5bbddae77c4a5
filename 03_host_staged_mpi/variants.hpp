// The combine variants a run compares, from --combine, --chunk-kb and --in-flight.
#pragma once

#include <string>
#include <vector>

#include "combine_steps.hpp"

namespace fwi {

struct VariantSpec {
    std::string name;           // pageable | pinned | pipelined | cuda_aware
    int chunk_kb = 0;           // pipelined only
    PipelineSettings pipeline;  // pipelined only
    std::string label() const;  // "pinned", "pipelined 1024KiB x2"
    std::string description() const;
};

// pageable, pinned, pipelined, cuda_aware
const std::vector<std::string>& combine_variant_names();

// "256,1024" -> {256, 1024}; UsageError naming `flag` and the range for anything else, and for a number
// given twice.
std::vector<int> parse_int_list(const std::string& flag, const std::string& text, int min, int max);

// --combine (a comma list of variant names, or "all"), --chunk-kb and --in-flight (comma lists): the
// variants in the order given, pipelined once for every (chunk size, in-flight) pair.
std::vector<VariantSpec> variant_specs(const std::string& combine, const std::string& chunk_kb,
                                       const std::string& in_flight);

// The variant names of --combine ("all" or a comma list), checked: UsageError for an unknown or repeated one.
std::vector<std::string> combine_variants(const std::string& combine);

constexpr int kMinChunkKb = 4, kMaxChunkKb = 1 << 20, kMaxInFlight = 64;

}  // namespace fwi
