#include "allreduce_sweep.hpp"

#include <algorithm>
#include <cstdio>

#include "bandwidth.hpp"
#include "errors.hpp"
#include "problem.hpp"

namespace fwi {

namespace {

// The participants line up: no participant finishes an allreduce of one value before every participant
// has started it, so the batch (or, --isolated, the allreduce) that follows starts on all of them together.
// One process driving every GPU (02) is the only participant and has nothing to line up with.
void line_up(const SweepLayout& layout) {
    if (!layout.reduce) return;
    std::vector<double> token{0.0};
    layout.reduce(token, ReduceOp::max);
}

}  // namespace

SweepRow measure_allreduce_size(AllreduceSweepVariant& variant, size_t bytes, const AllreduceSweepOptions& options,
                                const SweepLayout& layout) {
    const size_t count = bytes / sizeof(float);
    variant.setup(count);
    variant.run(count);
    variant.wait();
    std::vector<double> wrong{static_cast<double>(variant.count_wrong(count))};

    const int iters = batch_iterations(bytes, options.iters);
    for (int i = 0; i < std::min(options.warmup, iters); ++i) variant.run(count);
    variant.wait();
    std::vector<double> samples;  // seconds per allreduce: of a batch, or of each call alone (--isolated)
    for (int repeat = 0; repeat < options.repeats; ++repeat) {
        variant.setup(count);
        variant.wait();
        if (options.isolated) {
            for (int i = 0; i < iters; ++i) {
                line_up(layout);
                samples.push_back(variant.time_alone(count));
            }
            continue;
        }
        line_up(layout);
        variant.begin_batch();
        for (int i = 0; i < iters; ++i) variant.run(count);
        samples.push_back(variant.end_batch() / iters);
    }
    // The last batch's results too, written over poison by allreduces that each followed another; the
    // larger of the two counts, so that a variant wrong every time counts its wrong elements once.
    if (!variant.sums_in_place()) wrong[0] = std::max(wrong[0], static_cast<double>(variant.count_wrong(count)));
    if (layout.reduce) {
        layout.reduce(samples, ReduceOp::max);  // an allreduce is done when the slowest participant is
        layout.reduce(wrong, ReduceOp::sum);
    }
    std::string note = variant.row_note(count);
    const std::string marker = fwi_gradient_marker(bytes);
    if (!marker.empty()) note += (note.empty() ? "" : "  ") + marker;
    return {bytes, median(samples), static_cast<long long>(wrong[0]), note};
}

void add_allreduce_sweep_flags(ArgParser& parser, AllreduceSweepOptions& options, const bool* requested) {
    const size_t before = parser.flags().size();
    parser.add_bytes("--min-bytes", &options.min_bytes, 4, kMaxSweepBytes,
                     "sweep: smallest buffer size in bytes (K, M, G: powers of 1024)");
    parser.add_bytes("--max-bytes", &options.max_bytes, 4, kMaxSweepBytes,
                     "sweep: largest buffer size in bytes (K, M, G: powers of 1024)");
    parser.add_double("--step-factor", &options.step_factor, 1.01, 1024,
                      "sweep: each size is this factor times the last");
    parser.add_int("--warmup", &options.warmup, 0, kMaxBatchIterations,
                   "sweep: untimed allreduces per size before timing (at most one batch's worth)");
    parser.add_int("--iters", &options.iters, 1, kMaxBatchIterations,
                   "sweep: allreduces per timed batch (fewer when a batch would move more than 1 GiB)");
    parser.add_int("--repeats", &options.repeats, 1, 100,
                   "sweep: timed batches per size; the median is reported (with --isolated, of every allreduce)");
    parser.add_switch("--isolated", &options.isolated,
                      "sweep: time each allreduce of a batch alone, as a run's combine is timed: the participants "
                      "line up, then the host's clock runs from the call to the end of its wait (default: each "
                      "batch of --iters calls back to back timed as a whole, as nccl-tests does)");
    // nccl-tests' names, so that its command lines work here: -b 8 -e 256M -f 2 -n 20 -w 5 (-g 8 in 02).
    parser.add_alias("-b", "--min-bytes");
    parser.add_alias("-e", "--max-bytes");
    parser.add_alias("-f", "--step-factor");
    parser.add_alias("-n", "--iters");
    parser.add_alias("-w", "--warmup");
    if (parser.has_flag("--gpus")) parser.add_alias("-g", "--gpus");
    if (requested) {
        const std::vector<std::string> all = parser.flags();
        parser.add_used_only(
            {all.begin() + long(before), all.end()}, [requested] { return *requested; }, "with --bench-allreduce");
    }
}

void refuse_fwi_flags_with_bench(ArgParser& parser, std::vector<std::string> problem_flags, const bool* bench) {
    problem_flags.insert(problem_flags.end(), {"--iterations", "--no-reference"});
    parser.add_used_only(
        problem_flags, [bench] { return !*bench; },
        "without --bench-allreduce (its sweep times the combine alone, at the default problem's gradient size)");
}

void validate_allreduce_sweep_options(const AllreduceSweepOptions& options) {
    if (options.min_bytes > options.max_bytes)
        throw UsageError("--min-bytes (" + std::to_string(options.min_bytes) + ") must not exceed --max-bytes (" +
                         std::to_string(options.max_bytes) + ")");
}

void require_sweep_fits(size_t largest_bytes, double buffers, size_t capacity_bytes, const std::string& needs,
                        const std::string& memory, const std::string& or_else) {
    // 0: the system did not say
    if (capacity_bytes == 0 || buffers * double(largest_bytes) <= double(capacity_bytes)) return;
    throw UsageError("--max-bytes: the largest size, " + format_number(gib(largest_bytes)) + " GiB, needs " + needs +
                     ", more than " + memory + " " + format_number(gib(capacity_bytes)) +
                     " GiB of memory; give less than 1/" + format_number(buffers) + " of it" + or_else);
}

std::vector<size_t> sweep_byte_sizes(size_t min_bytes, size_t max_bytes, double step_factor, size_t extra_bytes) {
    const auto whole_floats = [](double bytes) { return static_cast<size_t>(bytes) / 4 * 4; };
    std::vector<size_t> sizes;
    for (double bytes = static_cast<double>(min_bytes); bytes <= static_cast<double>(max_bytes); bytes *= step_factor)
        if (whole_floats(bytes) > 0) sizes.push_back(whole_floats(bytes));
    if (extra_bytes >= min_bytes && extra_bytes <= max_bytes) sizes.push_back(whole_floats(extra_bytes));
    std::sort(sizes.begin(), sizes.end());
    sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
    return sizes;
}

size_t fwi_gradient_bytes() { return Problem{}.model_cells() * sizeof(float); }

std::string fwi_gradient_marker(size_t bytes) {
    const Problem default_problem;
    if (bytes != fwi_gradient_bytes()) return "";
    return "<- FWI gradient " + std::to_string(default_problem.nz) + "x" + std::to_string(default_problem.nx) +
           " floats";
}

std::vector<size_t> allreduce_sweep_sizes(const AllreduceSweepOptions& options) {
    return sweep_byte_sizes(static_cast<size_t>(options.min_bytes), static_cast<size_t>(options.max_bytes),
                            options.step_factor, fwi_gradient_bytes());
}

int batch_iterations(size_t bytes, int iters) {
    constexpr size_t kBatchBytes = size_t(1) << 30;
    return static_cast<int>(std::clamp<size_t>(kBatchBytes / std::max<size_t>(bytes, 1), 1, iters));
}

long long SweepResult::wrong_total() const {
    long long total = 0;
    for (const SweepRow& row : rows) total += row.wrong;
    return total;
}

double SweepResult::average_bus_bandwidth(int ranks) const {
    if (rows.empty()) return 0.0;
    double sum = 0.0;
    for (const SweepRow& row : rows) sum += bus_bandwidth(row.bytes, row.seconds, ranks);
    return sum / static_cast<double>(rows.size());
}

std::string sweep_table_header(const std::string& title) {
    char columns[128];
    std::snprintf(columns, sizeof columns, "#%14s %12s %6s %11s %12s %12s %7s\n", "size(B)", "count", "type",
                  "time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong");
    return "\n# " + title + "\n" + columns;
}

std::string sweep_table_row(const SweepRow& row, int ranks) {
    char text[160];
    std::snprintf(text, sizeof text, "%15zu %12zu %6s %11.2f %12.2f %12.2f %7lld", row.bytes, row.bytes / sizeof(float),
                  "float", row.seconds * 1e6, algorithm_bandwidth(row.bytes, row.seconds) / 1e9,
                  bus_bandwidth(row.bytes, row.seconds, ranks) / 1e9, row.wrong);
    return text + (row.note.empty() ? "" : "  " + row.note) + "\n";
}

std::string sweep_table_footer(const SweepResult& result, int ranks) {
    char text[64];
    std::snprintf(text, sizeof text, "# Avg bus bandwidth    : %.2f GB/s\n", result.average_bus_bandwidth(ranks) / 1e9);
    return text;
}

JsonObject sweep_result_json(const SweepResult& result, const SweepLayout& layout) {
    std::vector<JsonObject> sizes;
    for (const SweepRow& row : result.rows)
        sizes.push_back(JsonObject()
                            .add("bytes", row.bytes)
                            .add("count", row.bytes / sizeof(float))
                            .add("time_s", row.seconds)
                            .add("algbw_GBps", algorithm_bandwidth(row.bytes, row.seconds) / 1e9)
                            .add("busbw_GBps", bus_bandwidth(row.bytes, row.seconds, layout.ranks) / 1e9)
                            .add("wrong", row.wrong));
    JsonObject json;
    json.add("kind", "allreduce_sweep")
        .add("pattern", layout.pattern)
        .add("variant", result.variant)
        .add("gpus", layout.gpus)
        .add("ranks", layout.ranks)
        .add("sizes", sizes)
        .add("avg_busbw_GBps", result.average_bus_bandwidth(layout.ranks) / 1e9)
        .add("wrong_total", result.wrong_total())
        .add("verified", result.wrong_total() == 0);
    return json;
}

void keep_json_of_first_wrong_sweep(SweepLayout& layout, const SweepResult& result) {
    if (result.wrong_total() > 0) layout.json_path.clear();
}

SweepResult run_allreduce_sweep(AllreduceSweepVariant& variant, const AllreduceSweepOptions& options,
                                const SweepLayout& layout) {
    SweepResult result{variant.name(), variant.unavailable_reason(), {}};
    if (!result.skipped_because.empty()) {
        if (layout.reports)
            std::printf("\n# %s: skipped: %s\n", result.variant.c_str(), result.skipped_because.c_str());
        return result;
    }
    if (layout.reports) {
        const std::string timing =
            options.isolated ? " (each allreduce timed alone, from its call to its wait's end)" : "";
        std::fputs(sweep_table_header(result.variant + ": " + variant.description() + timing).c_str(), stdout);
    }
    for (const size_t bytes : allreduce_sweep_sizes(options)) {
        result.rows.push_back(measure_allreduce_size(variant, bytes, options, layout));
        if (layout.reports) {
            std::fputs(sweep_table_row(result.rows.back(), layout.ranks).c_str(), stdout);
            std::fflush(stdout);  // a long sweep shows each row as it is measured
        }
    }
    if (layout.reports) {
        std::fputs(sweep_table_footer(result, layout.ranks).c_str(), stdout);
        emit_result(sweep_result_json(result, layout), layout.json_path);
    }
    return result;
}

}  // namespace fwi
