#include "bench.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <memory>

#include "bandwidth.hpp"
#include "cuda_check.hpp"
#include "device_combine.hpp"
#include "errors.hpp"
#include "gpu_resources.hpp"
#include "mpi_env.hpp"
#include "rank_collectives.hpp"
#include "timing.hpp"

namespace fwi {

namespace {

// One combine variant as the sweep runs it on this rank: the device buffer that the combine sums in place
// over the ranks, refilled before every check and timed batch from this rank's inputs, which stay on the
// device (a device-to-device copy, not timed). A combine returns once its sum is on the device, so the
// sweep's host clock times it and wait() has nothing left to wait for.
class CombineSweepVariant final : public AllreduceSweepVariant {
public:
    CombineSweepVariant(const VariantSpec& spec, size_t max_count, double timeout_s)
        : spec_(spec), timeout_s_(timeout_s), data_(max_count), inputs_(max_count) {
        std::vector<float> mine(max_count);
        for (size_t i = 0; i < max_count; ++i) mine[i] = allreduce_input(world_rank(), i);
        inputs_.upload(mine, nullptr);
        CUDA_CHECK(cudaStreamSynchronize(nullptr));
        combine_ = std::make_unique<DeviceCombine>(spec, data_.data(), max_count, MPI_COMM_WORLD, timeout_s);
    }

    std::string name() const override { return spec_.label(); }
    std::string description() const override { return spec_.description(); }
    std::string unavailable_reason() const override { return combine_->unavailable_reason(); }
    void setup(size_t count) override {
        CUDA_CHECK(cudaMemcpyAsync(data_.data(), inputs_.data(), count * sizeof(float), cudaMemcpyDeviceToDevice));
        CUDA_CHECK(cudaStreamSynchronize(nullptr));
    }
    void run(size_t count) override {
        WaitTimeout guard("the combine (" + spec_.label() + ", " + std::to_string(count * sizeof(float)) + " B)",
                          timeout_s_);
        phases_.push_back(combine_->combine(count));
    }
    void wait() override {}
    bool sums_in_place() const override { return true; }
    long long count_wrong(size_t count) override {
        const std::vector<float> result = data_.download(count, nullptr);
        long long wrong = 0;
        for (size_t i = 0; i < count; ++i) wrong += !(result[i] == allreduce_expected_sum(world_size(), i));
        return wrong;
    }
    // Where the time of this size's combines went: the median of each phase on this rank.
    std::string row_note(size_t /*count*/) override {
        std::vector<double> to_host, mpi, to_device;
        for (const CombineTimes& t : phases_) {
            to_host.push_back(t.to_host);
            mpi.push_back(t.mpi);
            to_device.push_back(t.to_device);
        }
        phases_.clear();
        char text[160];
        if (spec_.name == "cuda_aware")
            std::snprintf(text, sizeof text, "MPI %.0f us", 1e6 * median(mpi));
        else
            std::snprintf(text, sizeof text, "%sD2H %.0f | MPI %.0f | H2D %.0f us",
                          spec_.name == "pipelined" ? "busy " : "", 1e6 * median(to_host), 1e6 * median(mpi),
                          1e6 * median(to_device));
        return text;
    }

private:
    VariantSpec spec_;
    double timeout_s_;
    DeviceBuffer<float> data_, inputs_;
    std::unique_ptr<DeviceCombine> combine_;
    std::vector<CombineTimes> phases_;  // of every combine since the last row note
};

// The result of the first variant called `name` that ran, or nullptr.
const SweepResult* find_ran(const std::vector<VariantSpec>& specs, const std::vector<SweepResult>& all,
                            const std::string& name) {
    for (size_t k = 0; k < specs.size(); ++k)
        if (specs[k].name == name && all[k].skipped_because.empty()) return &all[k];
    return nullptr;
}

// The fastest pipelined setting at row `row`, or nullptr when none ran.
const SweepResult* best_pipelined(const std::vector<VariantSpec>& specs, const std::vector<SweepResult>& all,
                                  size_t row) {
    const SweepResult* best = nullptr;
    for (size_t k = 0; k < specs.size(); ++k)
        if (specs[k].name == "pipelined" && all[k].skipped_because.empty() &&
            (!best || all[k].rows[row].seconds < best->rows[row].seconds))
            best = &all[k];
    return best;
}

// Per size: the pageable and pinned bandwidths, and the best pipelined one as a multiple of pinned.
void print_summary(const std::vector<VariantSpec>& specs, const std::vector<SweepResult>& all) {
    const SweepResult* pinned = find_ran(specs, all, "pinned");
    const SweepResult* pageable = find_ran(specs, all, "pageable");
    if (!pinned || !best_pipelined(specs, all, 0)) return;
    std::printf("\n# Summary: algbw (GB/s) of pageable, pinned and the best pipelined setting; pipelined / pinned\n");
    std::printf("#%14s %10s %10s %10s %-24s %8s\n", "size(B)", "pageable", "pinned", "pipelined", " best setting",
                "ratio");
    double min_ratio_64mb = 0.0;
    for (size_t row = 0; row < pinned->rows.size(); ++row) {
        const size_t bytes = pinned->rows[row].bytes;
        const SweepResult* best = best_pipelined(specs, all, row);
        const double pinned_time = pinned->rows[row].seconds, best_time = best->rows[row].seconds;
        const double ratio = pinned_time / best_time;  // bandwidth ratio
        const std::string marker = fwi_gradient_marker(bytes);
        std::printf("%15zu %10.2f %10.2f %10.2f  %-23s %8.2f%s%s\n", bytes,
                    pageable ? algorithm_bandwidth(bytes, pageable->rows[row].seconds) / 1e9 : 0.0,
                    algorithm_bandwidth(bytes, pinned_time) / 1e9, algorithm_bandwidth(bytes, best_time) / 1e9,
                    best->variant.c_str(), ratio, marker.empty() ? "" : "  ", marker.c_str());
        if (bytes >= (size_t(64) << 20))
            min_ratio_64mb = min_ratio_64mb == 0.0 ? ratio : std::min(min_ratio_64mb, ratio);
    }
    if (min_ratio_64mb > 0.0) std::printf("# pipelined / pinned from 64 MB up: at least %.2fx\n", min_ratio_64mb);
}

}  // namespace

int run_bench_allreduce(const std::vector<VariantSpec>& specs, const AllreduceSweepOptions& options, int gpus,
                        double timeout_s, const std::string& json_path) {
    SweepLayout layout;
    layout.pattern = "03_host_staged_mpi";
    layout.gpus = gpus;
    layout.ranks = world_size();
    layout.reports = world_rank() == 0;
    layout.json_path = json_path;
    layout.reduce = [timeout_s](std::vector<double>& values, ReduceOp op) {
        reduce_over_ranks(values, op == ReduceOp::sum ? MPI_SUM : MPI_MAX,
                          "the other ranks in the sweep (line-up, times or #wrong)", timeout_s);
    };
    if (layout.reports)
        std::printf(
            "# --bench-allreduce: %d ranks on %d GPU(s); time = median of %d batches of up to %d combines "
            "(after %d untimed), %s, of the slowest rank\n",
            layout.ranks, gpus, options.repeats, options.iters, options.warmup,
            options.isolated ? "each combine timed alone after all ranks lined up"
                             : "each batch started by all ranks together");

    const size_t max_count = allreduce_sweep_sizes(options).back() / sizeof(float);
    std::vector<SweepResult> all;
    for (const VariantSpec& spec : specs) {
        CombineSweepVariant variant(spec, max_count, timeout_s);
        all.push_back(run_allreduce_sweep(variant, options, layout));
        keep_json_of_first_wrong_sweep(layout, all.back());
    }
    if (layout.reports) print_summary(specs, all);

    long long wrong = 0;
    for (const SweepResult& result : all) wrong += result.wrong_total();
    if (wrong > 0) throw VerificationError(std::to_string(wrong) + " wrong elements in total (see the #wrong columns)");
    return kExitOk;
}

}  // namespace fwi
