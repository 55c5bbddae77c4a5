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
// How it works: nccl-tests' shape. harness.cpp fills the inputs (small integers, so the exact sum is
// representable), poisons the outputs, runs a variant, counts wrong elements, times batches with CUDA
// events and prints the table; each variant file holds only its algorithm.
// What you should see: one table per variant with 0 in #wrong, then a summary per size.
#include <nccl.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>

#include "allreduce_variant.hpp"
#include "bandwidth.hpp"
#include "cli.hpp"
#include "errors.hpp"
#include "gpu_group.hpp"
#include "harness.hpp"
#include "output.hpp"
#include "problem.hpp"
#include "size_sweep.hpp"

using namespace fwi;

namespace {

struct Options {
    int gpus = 0;
    int min_bytes = 8;
    int max_bytes = 256 << 20;
    double step_factor = 2.0;
    std::string variants = "via_gpu0,ring,p2p_kernel,nccl";
    TimingOptions timing;
    VariantOptions variant;
    int one_shot_max_bytes = 512 << 10;
    double timeout_seconds = 30.0;
    std::string json_path;
};

std::vector<std::string> split_variant_list(const std::string& list) {
    std::vector<std::string> names;
    std::stringstream stream(list);
    for (std::string name; std::getline(stream, name, ',');) {
        bool known = false;
        for (const auto& candidate : variant_names()) known = known || candidate == name;
        if (!known)
            throw UsageError("--variants: unknown variant '" + name + "'; allowed a comma list of via_gpu0, ring, "
                             "p2p_kernel, nccl");
        names.push_back(name);
    }
    if (names.empty()) throw UsageError("--variants: needs at least one variant");
    return names;
}

bool parse_options(int argc, char** argv, Options& options) {
    ArgParser parser("02_allreduce_primitives",
                     "Hand-rolled allreduce variants across the GPUs of one process, timed beside NCCL over a "
                     "sweep of sizes (nccl-tests-style tables).");
    parser.add_int("--gpus", &options.gpus, 0, kMaxRanks, "GPUs to use, 0 = all visible (at most 8)");
    parser.add_int("--min-bytes", &options.min_bytes, 4, 1 << 30, "smallest buffer size in bytes");
    parser.add_int("--max-bytes", &options.max_bytes, 4, 1 << 30, "largest buffer size in bytes");
    parser.add_double("--step-factor", &options.step_factor, 1.01, 1024, "each size is this factor times the last");
    parser.add_string("--variants", &options.variants, "comma list of via_gpu0, ring, p2p_kernel, nccl");
    parser.add_int("--warmup", &options.timing.warmup, 0, 1000, "untimed allreduces per size before timing");
    parser.add_int("--iters", &options.timing.iters, 1, 10000,
                   "allreduces per timed batch (fewer when a batch would move more than 1 GiB)");
    parser.add_int("--repeats", &options.timing.repeats, 1, 100, "timed batches per size; the median is reported");
    parser.add_int("--ring-chunks", &options.variant.ring_chunks, 1, 64,
                   "ring: chunks per segment that pipeline copies with reductions (each at least 256 KiB)");
    parser.add_int("--one-shot-max-bytes", &options.one_shot_max_bytes, 0, 1 << 30,
                   "p2p_kernel: one-shot up to this size in bytes, two-shot above");
    parser.add_double("--timeout", &options.timeout_seconds, 1, 3600,
                      "seconds any wait on a GPU may take before the program gives up (exit 3)");
    parser.add_string("--json", &options.json_path, "also write the RESULT object to this file");
    if (!parser.parse(argc, argv)) return false;
    if (options.min_bytes > options.max_bytes)
        throw UsageError("--min-bytes (" + std::to_string(options.min_bytes) + ") must not exceed --max-bytes (" +
                         std::to_string(options.max_bytes) + ")");
    split_variant_list(options.variants);
    options.variant.one_shot_max_bytes = static_cast<size_t>(options.one_shot_max_bytes);
    return true;
}

void print_setup(const GpuGroup& group) {
    int nccl_version = 0;
    ncclGetVersion(&nccl_version);
    std::printf("# %d GPU(s), NCCL %d (NCCL_NVLS_ENABLE=%s)\n", group.size(), nccl_version,
                std::getenv("NCCL_NVLS_ENABLE") ? std::getenv("NCCL_NVLS_ENABLE") : "0");
    for (int rank = 0; rank < group.size(); ++rank)
        std::printf("#   GPU %d: %s, %d SMs\n", rank, group.device_name(rank).c_str(), group.multiprocessors(rank));
    const auto missing = group.pairs_without_peer_access();
    if (group.size() > 1 && missing.empty()) std::printf("# peer access: every pair\n");
    for (const auto& [rank, peer] : missing) std::printf("# no peer access: GPU %d -> GPU %d\n", rank, peer);
}

struct VariantResults {
    std::string name;
    bool hand_rolled = true;
    std::string skipped_because;  // empty when it ran
    std::map<size_t, Measurement> by_bytes;
};

std::string fwi_note(size_t bytes, size_t fwi_bytes) {
    const Problem default_problem;
    return bytes == fwi_bytes ? "<- FWI gradient " + std::to_string(default_problem.nz) + "x" +
                                    std::to_string(default_problem.nx) + " floats"
                              : "";
}

VariantResults run_variant(const std::string& name, GpuGroup& group, const Options& options,
                           const std::vector<size_t>& sizes, size_t fwi_bytes) {
    VariantResults results{name, name != "nccl", "", {}};
    const auto variant = make_variant(name, group, options.variant);
    results.skipped_because = variant->unavailable_reason();
    if (!results.skipped_because.empty()) {
        std::printf("\n# %s: skipped: %s\n", name.c_str(), results.skipped_because.c_str());
        return results;
    }
    print_table_header(*variant);
    for (size_t bytes : sizes) {
        const Measurement m = measure(*variant, group, bytes / sizeof(float), options.timing);
        std::string note = m.algorithm;
        const std::string marker = fwi_note(bytes, fwi_bytes);
        if (!marker.empty()) note += (note.empty() ? "" : "  ") + marker;
        print_table_row(m, group.size(), note);
        results.by_bytes[bytes] = m;
    }
    return results;
}

const VariantResults* find_ran(const std::vector<VariantResults>& all, const std::string& name) {
    for (const auto& results : all)
        if (results.name == name && results.skipped_because.empty()) return &results;
    return nullptr;
}

void print_summary(const std::vector<VariantResults>& all, const std::vector<size_t>& sizes, int ranks,
                   size_t fwi_bytes) {
    const VariantResults* nccl = find_ran(all, "nccl");
    std::vector<const VariantResults*> ran, hand_rolled;
    for (const auto& results : all)
        if (results.skipped_because.empty()) {
            ran.push_back(&results);
            if (results.hand_rolled) hand_rolled.push_back(&results);
        }
    if (ran.empty()) return;
    std::printf("\n# Summary: fastest variant per size%s\n",
                nccl ? "; hand-rolled busbw as a fraction of NCCL's" : " (nccl not run: no fractions)");
    std::printf("#%14s %-11s", "size(B)", "fastest");
    if (nccl)
        for (const auto* results : hand_rolled) std::printf(" %11s", results->name.c_str());
    std::printf("\n");
    for (size_t bytes : sizes) {
        const VariantResults* fastest = ran.front();
        for (const auto* results : ran)
            if (results->by_bytes.at(bytes).seconds < fastest->by_bytes.at(bytes).seconds) fastest = results;
        std::printf("%15zu %-11s", bytes, fastest->name.c_str());
        if (nccl) {
            const double nccl_busbw = bus_bandwidth(bytes, nccl->by_bytes.at(bytes).seconds, ranks);
            for (const auto* results : hand_rolled)
                std::printf(" %11.2f", bus_bandwidth(bytes, results->by_bytes.at(bytes).seconds, ranks) / nccl_busbw);
        }
        const std::string marker = fwi_note(bytes, fwi_bytes);
        std::printf("%s%s\n", marker.empty() ? "" : "  ", marker.c_str());
    }
}

JsonObject variant_json(const VariantResults& results, int ranks) {
    JsonObject json;
    json.add("status", results.skipped_because.empty() ? "ran" : "skipped");
    if (!results.skipped_because.empty()) return json.add("reason", results.skipped_because);
    JsonObject by_size;
    for (const auto& [bytes, m] : results.by_bytes) {
        JsonObject row;
        row.add("time_us", m.seconds * 1e6)
            .add("algbw_GBps", algorithm_bandwidth(bytes, m.seconds) / 1e9)
            .add("busbw_GBps", bus_bandwidth(bytes, m.seconds, ranks) / 1e9)
            .add("wrong", m.wrong);
        if (!m.algorithm.empty()) row.add("algorithm", m.algorithm);
        by_size.add(std::to_string(bytes), row);
    }
    return json.add("by_bytes", by_size);
}

int run(int argc, char** argv) {
    Options options;
    if (!parse_options(argc, argv, options)) return kExitOk;
    const std::vector<std::string> names = split_variant_list(options.variants);

    GpuGroup group(options.gpus, options.timeout_seconds);
    print_setup(group);
    const size_t fwi_bytes = Problem{}.model_cells() * sizeof(float);
    const std::vector<size_t> sizes =
        sweep_byte_sizes(options.min_bytes, options.max_bytes, options.step_factor, fwi_bytes);
    group.reserve(sizes.back() / sizeof(float));

    std::vector<VariantResults> all;
    for (const auto& name : names) all.push_back(run_variant(name, group, options, sizes, fwi_bytes));
    print_summary(all, sizes, group.size(), fwi_bytes);

    long long wrong = 0;
    JsonObject variants;
    for (const auto& results : all) {
        for (const auto& [bytes, m] : results.by_bytes) wrong += m.wrong;
        variants.add(results.name, variant_json(results, group.size()));
    }
    int nccl_version = 0;
    ncclGetVersion(&nccl_version);
    JsonObject result;
    result.add("pattern", "02_allreduce_primitives")
        .add("gpus", group.size())
        .add("peer_access_all_pairs", group.pairs_without_peer_access().empty())
        .add("device", group.device_name(0))
        .add("nccl_version", nccl_version)
        .add("fwi_gradient_bytes", static_cast<long long>(fwi_bytes))
        .add("wrong_elements", wrong)
        .add("variants", variants);
    emit_result(result, options.json_path);
    if (wrong > 0)
        throw VerificationError(std::to_string(wrong) + " wrong elements in total (see the #wrong columns)");
    return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
    return run_program("02_allreduce_primitives", [&] { return run(argc, argv); });
}
