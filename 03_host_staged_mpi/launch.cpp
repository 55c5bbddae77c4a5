#include "launch.hpp"

#include <algorithm>
#include <cstdio>

#include "cli.hpp"
#include "device.hpp"
#include "device_combine.hpp"
#include "errors.hpp"
#include "host_memory.hpp"
#include "mpi_check.hpp"
#include "mpi_env.hpp"
#include "rank_collectives.hpp"

namespace fwi {

bool parse_options(int argc, char** argv, Problem& problem, Options& o) {
    ArgParser parser("03_host_staged_mpi",
                     "One MPI rank per GPU (mpirun -np N); the gradients are summed through host memory.");
    const std::vector<std::string> problem_flags = add_problem_flags(parser, problem);
    add_shot_parallel_flags(parser, o, " (with several variants: the last one's, or the first failed one's)");
    parser.add_string("--combine", &o.combine, "all, or a comma list of pageable, pinned, pipelined, cuda_aware");
    parser.add_string("--chunk-kb", &o.chunk_kb,
                      "pipelined: chunk size in KiB (" + std::to_string(kMinChunkKb) + ".." +
                          std::to_string(kMaxChunkKb) + "); a comma list runs pipelined once per size");
    parser.add_string("--in-flight", &o.in_flight,
                      "pipelined: MPI operations in flight, 1 = one blocking MPI_Allreduce per chunk, N = up to N "
                      "MPI_Iallreduce (1.." +
                          std::to_string(kMaxInFlight) + "); a comma list runs each");
    parser.add_switch("--skip-without-gpus", &o.skip_without_gpus,
                      "exit 77 (a skipped test) instead of running when a node has more ranks than GPUs");
    parser.add_switch("--bench-allreduce", &o.bench, "time the combine alone over a sweep of sizes instead of FWI");
    add_allreduce_sweep_flags(parser, o.sweep, &o.bench);
    refuse_fwi_flags_with_bench(parser, problem_flags, &o.bench);
    parser.add_used_only(
        {"--chunk-kb", "--in-flight"},
        [&o] {
            const std::vector<std::string> names = combine_variants(o.combine);
            return std::find(names.begin(), names.end(), "pipelined") != names.end();
        },
        "when --combine runs pipelined (all, or a list that names it)");
    if (!parser.parse(argc, argv)) return false;
    validate(problem, parser);
    const int ranks_here = ranks_on_this_node(o.timeout_s);
    require_host_memory(problem, ranks_here);
    validate_allreduce_sweep_options(o.sweep);
    // The sweep's host memory, before any GPU is touched: every rank on this machine holds its inputs and a
    // staging buffer (pageable or pinned) of the largest size at once.
    if (o.bench) {
        const std::string needs = std::to_string(2 * ranks_here) +
                                  " buffers of it in host memory (inputs and a staging buffer for each rank; " +
                                  std::to_string(ranks_here) + (ranks_here == 1 ? " rank runs" : " ranks run") +
                                  " on this machine)";
        require_sweep_fits(allreduce_sweep_sizes(o.sweep).back(), 2 * size_t(ranks_here), physical_memory_bytes(),
                           needs, "this machine's");
    }
    return true;
}

void require_named_variants_available(const Options& o, const std::vector<VariantSpec>& specs) {
    if (o.combine == "all") return;
    const bool names_cuda_aware =
        std::any_of(specs.begin(), specs.end(), [](const VariantSpec& spec) { return spec.name == "cuda_aware"; });
    if (!names_cuda_aware) return;
    if (const std::string reason = cuda_aware_unavailable_reason(o.timeout_s); !reason.empty())
        throw EnvironmentError("--combine cuda_aware: not available here: " + reason +
                               ". Use --combine pinned or pipelined (or all, which skips cuda_aware)");
}

bool too_few_gpus_anywhere(double timeout_s) {
    const double short_here = visible_gpu_count_checked() < ranks_on_this_node(timeout_s) ? 1.0 : 0.0;
    return reduce_over_ranks(short_here, MPI_MAX, "the GPU count of the other nodes", timeout_s) > 0.0;
}

void print_variant_table(const std::vector<VariantLine>& lines, size_t gradient_bytes, int ranks, int iterations) {
    std::printf("\n# combine variants, %zu B gradient, %d ranks: medians over %d iterations (ms)\n", gradient_bytes,
                ranks, iterations);
    std::printf("# %-22s %12s %9s %7s %8s %8s %9s %8s\n", "variant", "per gradient", "combine", "share", "to-host",
                "MPI", "to-device", "verified");
    for (const VariantLine& v : lines) {
        if (v.skipped) {
            std::printf("  %-22s skipped\n", v.label.c_str());
            continue;
        }
        std::printf("  %-22s %12.3f %9.3f %6.1f%% %8.3f %8.3f %9.3f %8s\n", v.label.c_str(), 1e3 * v.per_gradient_s,
                    1e3 * v.combine_s, 100.0 * v.combine_share, 1e3 * v.to_host_s, 1e3 * v.mpi_s, 1e3 * v.to_device_s,
                    v.verified ? "yes" : "NO");
    }
}

}  // namespace fwi
