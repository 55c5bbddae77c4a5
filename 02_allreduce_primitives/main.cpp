// 02_allreduce_primitives: what an allreduce is and how to build one across the GPUs of one process.
//
// Purpose: every multi-GPU FWI step ends with an allreduce of the gradient (each GPU holds the sum of
// its shots' gradients; every GPU needs the sum over all GPUs). This program builds that operation
// three ways by hand and measures them beside NCCL over a sweep of sizes:
//   via_gpu0    gather to GPU 0, sum, broadcast back               (via_gpu0.cu)
//   ring        reduce-scatter + all-gather with peer copies        (ring.cu, ring_schedule.cpp)
//   p2p_kernel  kernels that load/store peer memory directly        (p2p_kernel.cu)
//   nccl        ncclAllReduce, the reference                        (nccl.cu)
// What you learn: why the textbook version does not scale, how a ring keeps every link busy, why
// one-shot wins small buffers and the ring/two-shot large ones, and how close hand-rolled code gets.
// How it works: nccl-tests' shape. The sweep (common/allreduce_sweep.cpp, shared with 03, 05 and doctor) runs
// each size: a check run (inputs are small integers, so the exact sum is representable; outputs are
// poisoned first), warm-up, batches timed with CUDA events, and the table; allreduce_variant.cpp and
// gpu_group.cu hold what this lesson's variants share on the GPUs; each variant file holds only its
// algorithm.
// What you should see: one table per variant with 0 in #wrong and its RESULT line, then a summary per
// size.
#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "allreduce_sweep.hpp"
#include "allreduce_variant.hpp"
#include "bandwidth.hpp"
#include "cli.hpp"
#include "device.hpp"
#include "errors.hpp"
#include "gpu_group.hpp"
#include "launch_env.hpp"
#include "nccl_comm.hpp"
#include "output.hpp"
#include "run_env.hpp"

using namespace fwi;

namespace {

struct Options {
    int gpus = 0;
    AllreduceSweepOptions sweep;
    std::string variants = "via_gpu0,ring,p2p_kernel,nccl";
    VariantOptions variant;
    long long one_shot_max_bytes = static_cast<long long>(VariantOptions().one_shot_max_bytes);
    double timeout_s = 30.0;
    bool no_peer_access = false;
    std::string json_path;
};

std::vector<std::string> split_variant_list(const std::string& list) {
    return split_choice_list("--variants", list, variant_names(), "variant");
}

bool parse_options(int argc, char** argv, Options& options) {
    ArgParser parser("02_allreduce_primitives",
                     "Hand-rolled allreduce variants across the GPUs of one process, timed beside NCCL over a sweep of "
                     "sizes (nccl-tests-style tables).");
    parser.add_int("--gpus", &options.gpus, 0, kMaxRanks, "GPUs to use, 0 = all visible (at most 8)");
    add_allreduce_sweep_flags(parser, options.sweep);
    parser.add_string("--variants", &options.variants, "comma list of via_gpu0, ring, p2p_kernel, nccl");
    parser.add_int("--ring-chunks", &options.variant.ring_chunks, 1, 64,
                   "ring: chunks per segment that pipeline copies with reductions (each at least 256 KiB)");
    parser.add_bytes("--one-shot-max-bytes", &options.one_shot_max_bytes, 0, 1 << 30,
                     "p2p_kernel: one-shot up to this size in bytes (or with K, M, G), two-shot above");
    parser.add_switch("--no-peer-access", &options.no_peer_access,
                      "leave peer access off, as on a machine without P2P: via_gpu0's and ring's copies are staged "
                      "through host memory, p2p_kernel cannot run, and NCCL gets NCCL_P2P_DISABLE=1");
    parser.add_double("--timeout", &options.timeout_s, 1, 3600,
                      "seconds any wait on a GPU or on NCCL may take before the program gives up (exit 3)");
    const auto variants_include = [&options](const std::string& name) {
        const std::vector<std::string> names = split_variant_list(options.variants);
        return std::find(names.begin(), names.end(), name) != names.end();
    };
    parser.add_used_only(
        {"--ring-chunks"}, [variants_include] { return variants_include("ring"); }, "when --variants includes ring");
    parser.add_used_only(
        {"--no-peer-access"},
        [variants_include] {
            return variants_include("via_gpu0") || variants_include("ring") || variants_include("nccl");
        },
        "when --variants includes via_gpu0, ring or nccl (p2p_kernel cannot run without peer access)");
    parser.add_used_only(
        {"--one-shot-max-bytes"}, [variants_include] { return variants_include("p2p_kernel"); },
        "when --variants includes p2p_kernel");
    parser.add_string("--json", &options.json_path,
                      "also write the RESULT object to this file (the last variant's, or the first wrong one's)");
    if (!parser.parse(argc, argv)) return false;
    refuse_launch_as_several_ranks("02 drives every GPU from one process: run it without mpirun");
    validate_allreduce_sweep_options(options.sweep);
    split_variant_list(options.variants);
    options.variant.one_shot_max_bytes = static_cast<size_t>(options.one_shot_max_bytes);
    return true;
}

void print_setup(const GpuGroup& group) {
    std::printf("# %d GPU(s), %s (NCCL_NVLS_ENABLE=%s)\n", group.size(), nccl_version_string().c_str(),
                std::getenv("NCCL_NVLS_ENABLE") ? std::getenv("NCCL_NVLS_ENABLE") : "0");
    for (int rank = 0; rank < group.size(); ++rank)
        std::printf("#   GPU %d: %s, %d SMs\n", rank, group.device_name(rank).c_str(), group.multiprocessors(rank));
    const auto missing = group.pairs_without_peer_access();
    if (group.size() > 1 && group.peer_access_left_off())
        std::printf("# peer access: left off (--no-peer-access; NCCL_P2P_DISABLE=1)\n");
    else if (group.size() > 1 && missing.empty())
        std::printf("# peer access: every pair\n");
    else
        for (const auto& [rank, peer] : missing) std::printf("# no peer access: GPU %d -> GPU %d\n", rank, peer);
}

// Per size: the fastest variant, and each hand-rolled variant's busbw as a fraction of NCCL's. Every
// variant that ran has one row per size, the same sizes in the same order.
void print_summary(const std::vector<SweepResult>& all, int ranks) {
    const SweepResult* nccl = nullptr;
    std::vector<const SweepResult*> ran, hand_rolled;
    for (const auto& result : all) {
        if (!result.skipped_because.empty()) continue;
        ran.push_back(&result);
        if (result.variant == "nccl")
            nccl = &result;
        else
            hand_rolled.push_back(&result);
    }
    if (ran.empty()) return;
    // On one GPU busbw is 0 by definition (the factor 2(n-1)/n): there is no fraction to give.
    const bool fractions = nccl && ranks > 1;
    std::printf("\n# Summary: fastest variant per size%s\n",
                fractions ? "; hand-rolled busbw as a fraction of NCCL's"
                          : (nccl ? " (one GPU: busbw is 0, so no fractions)" : " (nccl not run: no fractions)"));
    std::printf("#%14s %-11s", "size(B)", "fastest");
    if (fractions)
        for (const auto* result : hand_rolled) std::printf(" %11s", result->variant.c_str());
    std::printf("\n");
    for (size_t row = 0; row < ran.front()->rows.size(); ++row) {
        const size_t bytes = ran.front()->rows[row].bytes;
        const SweepResult* fastest = ran.front();
        for (const auto* result : ran)
            if (result->rows[row].seconds < fastest->rows[row].seconds) fastest = result;
        std::printf("%15zu %-11s", bytes, fastest->variant.c_str());
        if (fractions) {
            const double nccl_busbw = bus_bandwidth(bytes, nccl->rows[row].seconds, ranks);
            for (const auto* result : hand_rolled)
                std::printf(" %11.2f", bus_bandwidth(bytes, result->rows[row].seconds, ranks) / nccl_busbw);
        }
        const std::string marker = fwi_gradient_marker(bytes);
        std::printf("%s%s\n", marker.empty() ? "" : "  ", marker.c_str());
    }
}

// Every GPU holds a send and a receive buffer of the sweep's largest size, ring adds its scratch segment
// (1/n of one) on every GPU, and via_gpu0 one buffer for each other GPU on GPU 0. A size too large is refused
// with the most a variant needs, naming every variant that could be left out to make it fit.
void require_buffers_fit(const GpuGroup& group, size_t largest_bytes, const std::vector<std::string>& variants) {
    const auto require = [&](int rank, double buffers, const std::string& needs, const std::string& or_else) {
        require_sweep_fits(largest_bytes, buffers, device_memory_bytes(rank), needs,
                           "GPU " + std::to_string(rank) + "'s", or_else);
    };
    // Every GPU's pair first, so that leaving a variant out is advised only where that would do.
    for (int rank = 0; rank < group.size(); ++rank) require(rank, 2, "a send and a receive buffer on every GPU", "");
    const int n = group.size();
    struct More {  // a variant that needs more than the pair on a GPU
        std::string variant;
        double buffers;
        std::string needs;
    };
    const auto chosen = [&](const char* variant) {
        return std::find(variants.begin(), variants.end(), variant) != variants.end();
    };
    for (int rank = 0; rank < n; ++rank) {
        std::vector<More> more;
        if (chosen("ring") && n > 1)
            more.push_back({"ring", 2.0 + 1.0 / n,
                            "a send and a receive buffer on every GPU, and with ring a scratch segment of 1/" +
                                std::to_string(n) + " of one"});
        if (chosen("via_gpu0") && rank == 0)
            more.push_back(
                {"via_gpu0", n + 1.0,
                 std::to_string(n + 1) +
                     " buffers of it on GPU 0 with via_gpu0 (a send, a receive and one for each other GPU)"});
        // The most that a variant which does not fit needs, naming every such variant in the advice.
        const double capacity = double(device_memory_bytes(rank));
        const More* most = nullptr;
        std::vector<std::string> too_large;
        for (const More& variant : more)
            if (capacity > 0 && variant.buffers * double(largest_bytes) > capacity) {
                too_large.push_back(variant.variant);
                if (!most || variant.buffers > most->buffers) most = &variant;
            }
        if (most)
            require(rank, most->buffers, most->needs, ", or leave " + join(too_large, " and ") + " out of --variants");
    }
}

int run(int argc, char** argv) {
    Options options;
    if (!parse_options(argc, argv, options)) return kExitOk;
    const std::vector<std::string> names = split_variant_list(options.variants);
    check_writable(options.json_path, "--json");  // written at the end: refused now, not after the sweep

    // Before NCCL starts: it would otherwise enable peer access itself, for every variant after it.
    if (options.no_peer_access) set_environment_variable("NCCL_P2P_DISABLE", "1");
    GpuGroup group(options.gpus, options.timeout_s,
                   options.no_peer_access ? PeerAccess::leave_off : PeerAccess::enable);
    print_setup(group);
    if (const int visible = visible_gpu_count(); options.gpus == 0 && visible > group.size())
        print_note("using " + std::to_string(group.size()) + " of the " + std::to_string(visible) +
                   " visible GPUs: the variants take at most " + std::to_string(kMaxRanks) + " (--gpus)");
    const size_t largest_bytes = allreduce_sweep_sizes(options.sweep).back();
    require_buffers_fit(group, largest_bytes, names);
    group.reserve(largest_bytes / sizeof(float));

    SweepLayout layout;
    layout.pattern = "02_allreduce_primitives";
    layout.gpus = layout.ranks = group.size();
    layout.json_path = options.json_path;
    std::vector<SweepResult> all;
    for (const auto& name : names) {
        const auto variant = make_variant(name, group, options.variant);
        all.push_back(run_allreduce_sweep(*variant, options.sweep, layout));
        keep_json_of_first_wrong_sweep(layout, all.back());
    }
    print_summary(all, group.size());

    long long wrong = 0;
    for (const auto& result : all) wrong += result.wrong_total();
    if (wrong > 0) throw VerificationError(std::to_string(wrong) + " wrong elements in total (see the #wrong columns)");
    return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
    return run_program("02_allreduce_primitives", [&] { return run(argc, argv); });
}
