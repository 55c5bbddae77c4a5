#include "bench.hpp"

#include <cuda_runtime.h>

#include <cstdio>
#include <map>

#include "bandwidth.hpp"
#include "classic_values.hpp"
#include "cuda_check.hpp"
#include "device.hpp"
#include "device_combine.hpp"
#include "errors.hpp"
#include "mpi_env.hpp"
#include "output.hpp"
#include "problem.hpp"
#include "rank_collectives.hpp"
#include "size_sweep.hpp"
#include "timing.hpp"

namespace fwi {

namespace {

struct Row {
    double seconds = 0.0;  // median over the repetitions of the slowest rank's combine time
    long long wrong = 0;   // over all ranks: after one combine, and again after the timed ones
    CombineTimes phases;   // rank 0's medians
};

struct VariantRows {
    VariantSpec spec;
    std::string skipped_because;
    std::map<size_t, Row> by_bytes;
};

// The device buffer the combines sum in place, and this rank's classic contribution to refill it from
// before every combine (a device-to-device copy, not timed).
struct BenchBuffers {
    BenchBuffers(size_t max_count, int rank) : data(max_count), contribution(max_count) {
        contribution.upload(classic_contribution(rank, max_count));
        CUDA_CHECK(cudaStreamSynchronize(nullptr));
    }
    void refill(size_t count) {
        CUDA_CHECK(cudaMemcpyAsync(data.data(), contribution.data(), count * sizeof(float), cudaMemcpyDeviceToDevice));
        CUDA_CHECK(cudaStreamSynchronize(nullptr));
    }
    DeviceBuffer<float> data, contribution;
};

CombineTimes guarded_combine(DeviceCombine& combine, size_t count, const VariantSpec& spec, double timeout_s) {
    WaitTimeout guard("the combine (" + spec.label() + ", " + std::to_string(count * sizeof(float)) + " B)", timeout_s);
    return combine.combine(count);
}

long long combine_once_and_count_wrong(DeviceCombine& combine, BenchBuffers& buffers, size_t count,
                                       const VariantSpec& spec, double timeout_s) {
    buffers.refill(count);
    guarded_combine(combine, count, spec, timeout_s);
    const std::vector<float> result = buffers.data.download(count);
    return count_wrong_sums(result.data(), count, world_size());
}

Row measure(DeviceCombine& combine, BenchBuffers& buffers, size_t bytes, const VariantSpec& spec,
            const BenchSettings& settings, double timeout_s) {
    const size_t count = bytes / sizeof(float);
    long long wrong = combine_once_and_count_wrong(combine, buffers, count, spec, timeout_s);
    for (int i = 0; i < settings.warmup; ++i) {
        buffers.refill(count);
        guarded_combine(combine, count, spec, timeout_s);
    }
    std::vector<double> wall, to_host, mpi, to_device;
    for (int i = 0; i < settings.repeats; ++i) {
        buffers.refill(count);
        barrier_with_timeout(MPI_COMM_WORLD, "the barrier before a timed combine", timeout_s);
        const CombineTimes t = guarded_combine(combine, count, spec, timeout_s);
        wall.push_back(t.wall);
        to_host.push_back(t.to_host);
        mpi.push_back(t.mpi);
        to_device.push_back(t.to_device);
    }
    // A combine is finished when the slowest rank has its result.
    reduce_over_ranks(wall, MPI_MAX, "the combine times of the other ranks", timeout_s);
    wrong += combine_once_and_count_wrong(combine, buffers, count, spec, timeout_s);  // back to back stays right

    Row row;
    row.seconds = median(wall);
    row.phases = {median(wall), median(to_host), median(mpi), median(to_device)};
    row.wrong = static_cast<long long>(reduce_over_ranks(double(wrong), MPI_SUM, "the #wrong counts", timeout_s));
    return row;
}

std::string phase_note(const VariantSpec& spec, const CombineTimes& t) {
    char text[160];
    if (spec.name == "cuda_aware")
        std::snprintf(text, sizeof text, "MPI %.0f us", 1e6 * t.mpi);
    else
        std::snprintf(text, sizeof text, "%sD2H %.0f | MPI %.0f | H2D %.0f us", spec.name == "pipelined" ? "busy " : "",
                      1e6 * t.to_host, 1e6 * t.mpi, 1e6 * t.to_device);
    return text;
}

std::string fwi_marker(size_t bytes) {
    const Problem p;
    return bytes == p.model_cells() * sizeof(float)
               ? "  <- FWI gradient " + std::to_string(p.nz) + "x" + std::to_string(p.nx) + " floats"
               : "";
}

VariantRows run_variant(const VariantSpec& spec, BenchBuffers& buffers, const std::vector<size_t>& sizes,
                        const BenchSettings& settings, int ranks, double timeout_s) {
    VariantRows results{spec, "", {}};
    DeviceCombine combine(spec, buffers.data.data(), sizes.back() / sizeof(float), MPI_COMM_WORLD);
    results.skipped_because = combine.unavailable_reason();
    const bool root = world_rank() == 0;
    if (!results.skipped_because.empty()) {
        if (root) std::printf("\n# %s: skipped: %s\n", spec.label().c_str(), results.skipped_because.c_str());
        return results;
    }
    if (root) print_bandwidth_table_header(spec.label() + ": " + spec.description());
    for (const size_t bytes : sizes) {
        const Row row = measure(combine, buffers, bytes, spec, settings, timeout_s);
        if (root)
            print_bandwidth_table_row(bytes, row.seconds, ranks, row.wrong,
                                      phase_note(spec, row.phases) + fwi_marker(bytes));
        results.by_bytes[bytes] = row;
    }
    return results;
}

const VariantRows* find_ran(const std::vector<VariantRows>& all, const std::string& name) {
    for (const VariantRows& rows : all)
        if (rows.spec.name == name && rows.skipped_because.empty()) return &rows;
    return nullptr;
}

// The fastest pipelined configuration at `bytes`, or nullptr when none ran.
const VariantRows* best_pipelined(const std::vector<VariantRows>& all, size_t bytes) {
    const VariantRows* best = nullptr;
    for (const VariantRows& rows : all)
        if (rows.spec.name == "pipelined" && rows.skipped_because.empty() &&
            (!best || rows.by_bytes.at(bytes).seconds < best->by_bytes.at(bytes).seconds))
            best = &rows;
    return best;
}

// Per size: the pageable and pinned bandwidths and the best pipelined one as a multiple of pinned.
// Returns {bytes: {best, ratio}} for the RESULT line and the smallest ratio from 64 MB up (0: none).
JsonObject print_summary(const std::vector<VariantRows>& all, const std::vector<size_t>& sizes,
                         double& min_ratio_64mb) {
    JsonObject ratios;
    min_ratio_64mb = 0.0;
    const VariantRows* pinned = find_ran(all, "pinned");
    const VariantRows* pageable = find_ran(all, "pageable");
    if (!pinned || !best_pipelined(all, sizes.front())) return ratios;
    std::printf("\n# Summary: algbw (GB/s) of pageable, pinned and the best pipelined setting; pipelined / pinned\n");
    std::printf("#%14s %10s %10s %10s %-24s %8s\n", "size(B)", "pageable", "pinned", "pipelined", " best setting",
                "ratio");
    for (const size_t bytes : sizes) {
        const VariantRows* best = best_pipelined(all, bytes);
        const double pinned_time = pinned->by_bytes.at(bytes).seconds, best_time = best->by_bytes.at(bytes).seconds;
        const double ratio = pinned_time / best_time;  // bandwidth ratio
        std::printf("%15zu %10.2f %10.2f %10.2f  %-23s %8.2f%s\n", bytes,
                    pageable ? algorithm_bandwidth(bytes, pageable->by_bytes.at(bytes).seconds) / 1e9 : 0.0,
                    algorithm_bandwidth(bytes, pinned_time) / 1e9, algorithm_bandwidth(bytes, best_time) / 1e9,
                    best->spec.label().c_str(), ratio, fwi_marker(bytes).c_str());
        ratios.add(std::to_string(bytes), JsonObject().add("best", best->spec.label()).add("ratio", ratio));
        if (bytes >= (size_t(64) << 20))
            min_ratio_64mb = min_ratio_64mb == 0.0 ? ratio : std::min(min_ratio_64mb, ratio);
    }
    if (min_ratio_64mb > 0.0)
        std::printf("# pipelined / pinned from 64 MB up: at least %.2fx (the issue asks for 1.5x, aims for 2x)\n",
                    min_ratio_64mb);
    return ratios;
}

JsonObject variant_json(const VariantRows& rows, int ranks) {
    JsonObject json;
    json.add("status", rows.skipped_because.empty() ? "ran" : "skipped");
    if (!rows.skipped_because.empty()) return json.add("reason", rows.skipped_because);
    JsonObject by_bytes;
    for (const auto& [bytes, row] : rows.by_bytes)
        by_bytes.add(std::to_string(bytes), JsonObject()
                                                .add("time_us", 1e6 * row.seconds)
                                                .add("algbw_GBps", algorithm_bandwidth(bytes, row.seconds) / 1e9)
                                                .add("busbw_GBps", bus_bandwidth(bytes, row.seconds, ranks) / 1e9)
                                                .add("wrong", row.wrong)
                                                .add("to_host_us", 1e6 * row.phases.to_host)
                                                .add("mpi_us", 1e6 * row.phases.mpi)
                                                .add("to_device_us", 1e6 * row.phases.to_device));
    return json.add("by_bytes", by_bytes);
}

}  // namespace

int run_bench_allreduce(const std::vector<VariantSpec>& specs, const BenchSettings& settings, int gpus,
                        double timeout_s, const std::string& json_path) {
    const int ranks = world_size();
    const bool root = world_rank() == 0;
    const size_t fwi_bytes = Problem{}.model_cells() * sizeof(float);
    const std::vector<size_t> sizes =
        sweep_byte_sizes(settings.min_bytes, settings.max_bytes, settings.step_factor, fwi_bytes);
    if (root)
        std::printf(
            "# --bench-allreduce: %d ranks on %d GPU(s); time = median of %d combines (after %d untimed), "
            "each after a barrier, of the slowest rank; #wrong: the classic check (rank r adds r + 0.001 i)\n",
            ranks, gpus, settings.repeats, settings.warmup);
    BenchBuffers buffers(sizes.back() / sizeof(float), world_rank());

    std::vector<VariantRows> all;
    for (const VariantSpec& spec : specs) all.push_back(run_variant(spec, buffers, sizes, settings, ranks, timeout_s));
    double min_ratio_64mb = 0.0;
    const JsonObject ratios = root ? print_summary(all, sizes, min_ratio_64mb) : JsonObject();

    long long wrong = 0;
    JsonObject variants;
    for (const VariantRows& rows : all) {
        for (const auto& [bytes, row] : rows.by_bytes) wrong += row.wrong;
        variants.add(rows.spec.key(), variant_json(rows, ranks));
    }
    if (root) {
        JsonObject result;
        result.add("pattern", "03_host_staged_mpi_bench")
            .add("ranks", ranks)
            .add("gpus", gpus)
            .add("fwi_gradient_bytes", static_cast<long long>(fwi_bytes))
            .add("wrong_elements", wrong)
            .add("variants", variants)
            .add("pipelined_over_pinned", ratios);
        if (min_ratio_64mb > 0.0) result.add("pipelined_over_pinned_min_64MB_up", min_ratio_64mb);
        emit_result(result, json_path);
    }
    if (wrong > 0) throw VerificationError(std::to_string(wrong) + " wrong elements in total (see the #wrong columns)");
    return kExitOk;
}

}  // namespace fwi
