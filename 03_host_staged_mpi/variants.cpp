#include "variants.hpp"

#include <algorithm>
#include <string>

#include "cli.hpp"
#include "errors.hpp"

namespace fwi {

const std::vector<std::string>& combine_variant_names() {
    static const std::vector<std::string> names{"pageable", "pinned", "pipelined", "cuda_aware"};
    return names;
}

std::string VariantSpec::label() const {
    if (name != "pipelined") return name;
    return name + " " + std::to_string(chunk_kb) + "KiB x" + std::to_string(pipeline.in_flight);
}

std::string VariantSpec::description() const {
    if (name == "pageable") return "copy to a plain (pageable) host buffer, one MPI_Allreduce, copy back";
    if (name == "pinned")
        return "the same through a pinned buffer (cudaHostAlloc): one D2H, one MPI_Allreduce, one H2D";
    if (name == "cuda_aware") return "the device pointer straight to one MPI_Allreduce (needs a CUDA-aware MPI)";
    return "pinned buffer in chunks of " + std::to_string(chunk_kb) +
           " KiB; D2H of chunk k+1, MPI on chunk k and H2D of chunk k-1 overlap; " +
           (pipeline.in_flight == 1 ? std::string("one blocking MPI_Allreduce per chunk")
                                    : "up to " + std::to_string(pipeline.in_flight) + " MPI_Iallreduce in flight");
}

std::vector<int> parse_int_list(const std::string& flag, const std::string& text, int min, int max) {
    const std::string range = "a comma list of whole numbers in " + std::to_string(min) + ".." + std::to_string(max);
    std::vector<int> values;
    for (const std::string& item : split_comma_list(flag, text, range)) {
        // Digits only: stoll would also take leading blanks and a sign.
        const bool digits = item.size() <= 9 && item.find_first_not_of("0123456789") == std::string::npos;
        const long long value = digits ? std::stoll(item) : -1;
        if (!digits || value < min || value > max)
            throw UsageError(flag + ": '" + shown_value(item) + "' is not allowed; give " + range);
        if (std::find(values.begin(), values.end(), int(value)) != values.end())
            throw UsageError(flag + ": " + std::to_string(value) + " is listed twice");
        values.push_back(int(value));
    }
    return values;
}

std::vector<std::string> combine_variants(const std::string& combine) {
    if (combine == "all") return combine_variant_names();
    return split_choice_list("--combine", combine, combine_variant_names(), "variant", "all");
}

std::vector<VariantSpec> variant_specs(const std::string& combine, const std::string& chunk_kb,
                                       const std::string& in_flight) {
    const std::vector<int> chunks = parse_int_list("--chunk-kb", chunk_kb, kMinChunkKb, kMaxChunkKb);
    const std::vector<int> depths = parse_int_list("--in-flight", in_flight, 1, kMaxInFlight);
    std::vector<VariantSpec> specs;
    for (const std::string& name : combine_variants(combine)) {
        if (name != "pipelined") {
            specs.push_back({name, 0, {}});
            continue;
        }
        for (const int kb : chunks)
            for (const int depth : depths)
                specs.push_back({name, kb, PipelineSettings{size_t(kb) * 1024 / sizeof(float), depth}});
    }
    return specs;
}

}  // namespace fwi
