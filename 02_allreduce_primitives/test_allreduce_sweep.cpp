// The allreduce sweep that 02, 03 and 05 share (common/allreduce_sweep.hpp), on the CPU: its flags and
// sizes, the bandwidth arithmetic, the input data, the table and the RESULT, run with in-memory variants
// whose participants sum host buffers: one process holding every rank (02's layout), and one thread per
// rank agreeing through an injected reduce (03's and 05's layout, with threads standing in for MPI).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <limits>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "allreduce_sweep.hpp"
#include "bandwidth.hpp"
#include "errors.hpp"

using namespace fwi;

namespace {

AllreduceSweepOptions parsed(std::vector<const char*> args) {
    AllreduceSweepOptions options;
    ArgParser parser("test", "test");
    add_allreduce_sweep_flags(parser, options);
    args.insert(args.begin(), "test");
    parser.parse(static_cast<int>(args.size()), args.data());
    validate_allreduce_sweep_options(options);
    return options;
}

std::string usage_error_of(const std::vector<const char*>& args) {
    try {
        parsed(args);
    } catch (const UsageError& e) {
        return e.what();
    }
    return "";
}

// Small options that still take every path: several sizes, warm-up, several batches of several runs.
AllreduceSweepOptions quick_options() { return parsed({"--max-bytes", "64", "--step-factor", "4"}); }

// Ranks' buffers in host memory. A participant holds the ranks [first, first + held) of `ranks`; its
// allreduce sums every rank's input from `inputs`, which every participant can read.
struct HostRanks {
    HostRanks(int first, int held, int ranks, size_t capacity)
        : first(first), ranks(ranks), send(held, std::vector<float>(capacity)), recv(send) {}

    void setup(size_t count) {
        for (size_t r = 0; r < send.size(); ++r)
            for (size_t i = 0; i < count; ++i) {
                send[r][i] = allreduce_input(first + static_cast<int>(r), i);
                recv[r][i] = std::numeric_limits<float>::quiet_NaN();
            }
    }
    // Sums into every held result but leaves the last element of rank `skip_rank`'s unwritten.
    void sum(const std::vector<const float*>& inputs, size_t count, int skip_rank) {
        for (size_t r = 0; r < recv.size(); ++r)
            for (size_t i = 0; i < count; ++i) {
                if (first + static_cast<int>(r) == skip_rank && i + 1 == count) continue;
                float total = 0.0f;
                for (const float* input : inputs) total += input[i];
                recv[r][i] = total;
            }
    }
    long long count_wrong(size_t count) const {
        long long wrong = 0;
        for (const auto& result : recv)
            for (size_t i = 0; i < count; ++i) wrong += !(result[i] == allreduce_expected_sum(ranks, i));
        return wrong;
    }

    int first, ranks;
    std::vector<std::vector<float>> send, recv;
};

// The time a fake allreduce of `count` floats takes: 2 us plus 10 GB/s.
double fake_seconds(size_t count, int participant) { return (2e-6 + count * sizeof(float) / 10e9) * (participant + 1); }
// What a fake allreduce timed alone (--isolated) takes beyond that: the call's issue and the wait's notice.
constexpr double kFakeHostLatency = 50e-6;

// A variant over HostRanks with a fake clock: a batch takes fake_seconds per allreduce. Counts the calls
// the sweep makes, so the tests can check the sequence per size.
class HostVariant : public AllreduceSweepVariant {
public:
    HostVariant(HostRanks& mine, int participant, int skip_rank)
        : mine_(mine), participant_(participant), skip_rank_(skip_rank) {}

    std::string name() const override { return skip_rank_ < 0 ? "host_sum" : "host_sum_missing_one"; }
    std::string description() const override { return "host buffers summed on the CPU"; }
    void setup(size_t count) override {
        ++setups;
        mine_.setup(count);
    }
    void run(size_t count) override {
        ++runs;
        ++runs_in_batch_;
        last_count_ = count;
        exchange_and_sum(count);
    }
    void wait() override {}
    long long count_wrong(size_t count) override {
        ++checks;
        return mine_.count_wrong(count);
    }
    std::string row_note(size_t count) override { return "note " + std::to_string(count); }
    void begin_batch() override {
        ++batches;
        runs_in_batch_ = 0;
    }
    double end_batch() override { return runs_in_batch_ * fake_seconds(last_count_, participant_); }
    double time_alone(size_t count) override {
        ++timed_alone;
        run(count);
        return kFakeHostLatency + fake_seconds(count, participant_);
    }

    int setups = 0, runs = 0, batches = 0, timed_alone = 0, checks = 0;

protected:
    virtual void exchange_and_sum(size_t count) {
        std::vector<const float*> inputs;
        for (const auto& input : mine_.send) inputs.push_back(input.data());
        mine_.sum(inputs, count, skip_rank_);
    }
    HostRanks& mine_;
    int participant_;
    int skip_rank_;

private:
    int runs_in_batch_ = 0;
    size_t last_count_ = 0;
};

// A barrier for a fixed number of threads, reusable.
class Barrier {
public:
    explicit Barrier(int count) : count_(count) {}
    void arrive_and_wait() {
        std::unique_lock<std::mutex> lock(mutex_);
        const long generation = generation_;
        if (++arrived_ == count_) {
            arrived_ = 0;
            ++generation_;
            all_arrived_.notify_all();
            return;
        }
        all_arrived_.wait(lock, [&] { return generation_ != generation; });
    }

private:
    int count_, arrived_ = 0;
    long generation_ = 0;
    std::mutex mutex_;
    std::condition_variable all_arrived_;
};

// What the threads of one sweep share: the inputs every participant reads, and the reduce.
struct Wire {
    explicit Wire(int participants) : barrier(participants), inputs(participants), deposits(participants) {}

    void reduce(int participant, std::vector<double>& values, ReduceOp op) {
        ++reduces[participant];  // only this participant's thread writes its count
        deposits[participant] = values;
        barrier.arrive_and_wait();
        for (size_t k = 0; k < values.size(); ++k) {
            double combined = op == ReduceOp::sum ? 0.0 : -std::numeric_limits<double>::infinity();
            for (const auto& deposit : deposits)
                combined = op == ReduceOp::sum ? combined + deposit[k] : std::max(combined, deposit[k]);
            values[k] = combined;
        }
        barrier.arrive_and_wait();  // nobody deposits again before everyone has read
    }

    Barrier barrier;
    std::vector<const float*> inputs;
    std::vector<std::vector<double>> deposits;
    std::vector<int> reduces = std::vector<int>(deposits.size(), 0);  // calls per participant
};

// One rank per thread: its allreduce meets the others' on the wire.
class ThreadRankVariant final : public HostVariant {
public:
    ThreadRankVariant(HostRanks& mine, int participant, int skip_rank, Wire& wire)
        : HostVariant(mine, participant, skip_rank), wire_(wire) {
        wire_.inputs[participant] = mine.send[0].data();
    }
    void setup(size_t count) override {
        reduces_at_setup_ = wire_.reduces[participant_];
        HostVariant::setup(count);
    }
    // A timed batch that starts without a reduce since its setup did not line up with the other ranks.
    void begin_batch() override {
        if (wire_.reduces[participant_] == reduces_at_setup_) ++batches_not_lined_up;
        HostVariant::begin_batch();
    }
    // An allreduce timed alone without a reduce since the last one. Call i of a size is slow by
    // kSlowCall on rank i % ranks alone, so that each call's slowest rank (the median of those) and each
    // rank's median (the slowest of those) differ.
    double time_alone(size_t count) override {
        if (wire_.reduces[participant_] == reduces_at_last_alone_) ++alone_not_lined_up;
        reduces_at_last_alone_ = wire_.reduces[participant_];
        if (count != count_timed_alone_) calls_of_this_size_ = 0;
        count_timed_alone_ = count;
        const bool slow = calls_of_this_size_++ % int(wire_.deposits.size()) == participant_;
        return HostVariant::time_alone(count) + (slow ? kSlowCall : 0.0);
    }
    static constexpr double kSlowCall = 1e-3;
    int batches_not_lined_up = 0, alone_not_lined_up = 0;

private:
    int reduces_at_setup_ = 0, reduces_at_last_alone_ = 0, calls_of_this_size_ = 0;
    size_t count_timed_alone_ = 0;
    void exchange_and_sum(size_t count) override {
        wire_.barrier.arrive_and_wait();  // every rank's input is ready
        mine_.sum(wire_.inputs, count, skip_rank_);
        wire_.barrier.arrive_and_wait();  // nobody refills its input before everyone has read it
    }
    Wire& wire_;
};

// One sweep per rank, each on a thread of its own, meeting on the wire (03's and 05's layout): each rank's result.
std::vector<SweepResult> sweep_on_threads(std::vector<std::unique_ptr<ThreadRankVariant>>& variants, Wire& wire,
                                          const AllreduceSweepOptions& options) {
    const int ranks = static_cast<int>(variants.size());
    std::vector<SweepResult> results(ranks);
    std::vector<std::thread> threads;
    for (int rank = 0; rank < ranks; ++rank)
        threads.emplace_back([&, rank] {
            SweepLayout layout;
            layout.gpus = layout.ranks = ranks;
            layout.reports = false;
            layout.reduce = [&wire, rank](std::vector<double>& values, ReduceOp op) { wire.reduce(rank, values, op); };
            results[rank] = run_allreduce_sweep(*variants[rank], options, layout);
        });
    for (auto& thread : threads) thread.join();
    return results;
}

std::string read_file(const std::string& path) {
    std::ifstream file(path);
    std::stringstream text;
    text << file.rdbuf();
    return text.str();
}

}  // namespace

TEST_CASE("flags: one set of defaults, nccl-tests' names, bad input names the flag") {
    const AllreduceSweepOptions defaults = parsed({});
    CHECK(defaults.min_bytes == 8);
    CHECK(defaults.max_bytes == 256 << 20);
    CHECK(defaults.step_factor == 2.0);
    CHECK(defaults.warmup == 5);
    CHECK(defaults.iters == 20);
    CHECK(defaults.repeats == 5);
    CHECK_FALSE(defaults.isolated);

    const AllreduceSweepOptions set = parsed({"--min-bytes", "64", "--max-bytes=4096", "--step-factor", "4", "--warmup",
                                              "0", "--iters", "3", "--repeats", "7", "--isolated"});
    CHECK(set.min_bytes == 64);
    CHECK(set.max_bytes == 4096);
    CHECK(set.step_factor == 4.0);
    CHECK(set.warmup == 0);
    CHECK(set.iters == 3);
    CHECK(set.repeats == 7);
    CHECK(set.isolated);

    CHECK(usage_error_of({"--min-bytes", "4096", "--max-bytes", "1024"}) ==
          "--min-bytes (4096) must not exceed --max-bytes (1024)");
    CHECK(usage_error_of({"--min-bytes", "2"}).find("--min-bytes: 2 is out of range; allowed 4..") == 0);
    CHECK(usage_error_of({"--step-factor", "1"}).find("--step-factor") == 0);
    CHECK(usage_error_of({"--iters", "0"}).find("--iters") == 0);
    CHECK(usage_error_of({"--repeats", "0"}).find("--repeats") == 0);
}

TEST_CASE("flags: nccl-tests' short names -b -e -f -n -w, sizes with K/M/G, 64-bit sizes") {
    const AllreduceSweepOptions set = parsed({"-b", "1K", "-e", "4G", "-f", "4", "-n", "3", "-w", "0"});
    CHECK(set.min_bytes == 1024);
    CHECK(set.max_bytes == 4LL << 30);  // past INT_MAX: the sizes are 64-bit
    CHECK(set.step_factor == 4.0);
    CHECK(set.iters == 3);
    CHECK(set.warmup == 0);

    // Powers of 1024 as nccl-tests reads them, either case; plain bytes as before.
    CHECK(parsed({"-b", "8", "-e", "256M"}).max_bytes == 256LL << 20);
    CHECK(parsed({"--max-bytes", "2g"}).max_bytes == 2LL << 30);
    CHECK(parsed({"--max-bytes", "3k"}).max_bytes == 3072);
    CHECK(parsed({"--max-bytes", "64G"}).max_bytes == kMaxSweepBytes);
    CHECK(parsed({"--max-bytes", "5000000000"}).max_bytes == 5000000000LL);

    const auto sizes = allreduce_sweep_sizes(parsed({"-b", "1M", "-e", "4G"}));
    CHECK(sizes.size() == 13);  // 2^20 .. 2^32 (the FWI gradient, 768 KiB, is below -b)
    CHECK(sizes.front() == (size_t(1) << 20));
    CHECK(sizes.back() == (size_t(4) << 30));

    // Bad sizes name the flag as given, the long name and the range.
    CHECK(usage_error_of({"-b", "12Q"}).find("-b (--min-bytes): '12Q' is not a size; allowed 4..64G") == 0);
    CHECK(usage_error_of({"-e", "0"}).find("-e (--max-bytes): 0 is out of range; allowed 4..64G") == 0);
    CHECK(usage_error_of({"--max-bytes", "65G"}).find("--max-bytes: 65G is out of range") == 0);
    CHECK(usage_error_of({"-e", "1.5M"}).find("is not a size") != std::string::npos);
    CHECK(usage_error_of({"-e", "M"}).find("is not a size") != std::string::npos);
    CHECK(usage_error_of({"-e", "1MB"}).find("is not a size") != std::string::npos);
    CHECK(usage_error_of({"-e", " 1M"}).find("is not a size") != std::string::npos);
    CHECK(usage_error_of({"-e", "-4"}).find("out of range") != std::string::npos);
    CHECK(usage_error_of({"-e", "99999999999G"}).find("out of range") != std::string::npos);
    // (2^34 + 1) G is 2^64 + 1 GiB: a product left unchecked wraps to 1G, inside the range.
    CHECK(usage_error_of({"-e", "17179869185G"}).find("out of range") != std::string::npos);
    CHECK(usage_error_of({"-n", "0"}).find("-n (--iters): 0 is out of range") == 0);
    CHECK(usage_error_of({"-b", "1G", "-e", "1M"}) == "--min-bytes (1073741824) must not exceed --max-bytes (1048576)");

    // The parser's rules hold for the short names: a short name and its long name are one flag (given
    // twice), and a short name where a value should be is a missing value.
    CHECK(usage_error_of({"-b", "1M", "--min-bytes", "2M"}) == "--min-bytes given twice (as -b and --min-bytes)");
    CHECK(usage_error_of({"--iters=3", "-n", "4"}) == "--iters given twice (as --iters and -n)");
    CHECK(usage_error_of({"-w", "1", "-w", "2"}) == "-w given twice");
    CHECK(usage_error_of({"-b", "-e", "4G"}).find("-b (--min-bytes): missing value") == 0);
    CHECK(usage_error_of({"-b=1M"}) == "'-b=1M': a short flag takes its value after a space: -b 1M");

    // -g is --gpus where the program has --gpus (02); 03 and 05 (one GPU per rank) have neither.
    CHECK(usage_error_of({"-g", "2"}) == "unknown flag '-g'");
    int gpus = 0;
    AllreduceSweepOptions options;
    ArgParser parser("test", "test");
    parser.add_int("--gpus", &gpus, 0, 8, "GPUs");
    add_allreduce_sweep_flags(parser, options);
    const char* argv[] = {"test", "-g", "4", "-b", "1M"};
    CHECK(parser.parse(5, argv));
    CHECK(gpus == 4);
    CHECK(options.min_bytes == 1 << 20);
    const std::string help = parser.help_text();
    CHECK(help.find("-g, --gpus <0..8>") != std::string::npos);
    CHECK(help.find("-b, --min-bytes <4..64G>") != std::string::npos);
    CHECK(help.find("(default: 256M)") != std::string::npos);
}

TEST_CASE("sizes: nccl-tests' -b/-e/-f, whole floats, the FWI gradient inserted and marked") {
    const size_t fwi_bytes = 384 * 512 * 4;
    CHECK(fwi_gradient_bytes() == fwi_bytes);
    CHECK(fwi_gradient_marker(fwi_bytes) == "<- FWI gradient 384x512 floats");
    CHECK(fwi_gradient_marker(fwi_bytes + 4).empty());

    const auto sizes = allreduce_sweep_sizes(AllreduceSweepOptions{});
    CHECK(sizes.size() == 27);  // 2^3 .. 2^28, plus 786432
    CHECK(sizes.front() == 8);
    CHECK(sizes.back() == (size_t(256) << 20));
    CHECK(std::find(sizes.begin(), sizes.end(), fwi_bytes) != sizes.end());
    for (size_t i = 0; i < sizes.size(); ++i) {
        CHECK(sizes[i] % 4 == 0);
        if (i) CHECK(sizes[i] > sizes[i - 1]);
    }
    CHECK(sweep_byte_sizes(4, 4, 2.0, fwi_bytes) == std::vector<size_t>{4});
    CHECK(sweep_byte_sizes(10, 30, 1.5, 0) == std::vector<size_t>{8, 12, 20});
    CHECK(sweep_byte_sizes(6, 6, 2.0, 6) == std::vector<size_t>{4});
    // The extra size at either end of the range is kept (1000 * 2^k never reaches it).
    CHECK(sweep_byte_sizes(1000, fwi_bytes, 2.0, fwi_bytes).back() == fwi_bytes);
    CHECK(sweep_byte_sizes(fwi_bytes, 4 * fwi_bytes, 3.0, fwi_bytes).front() == fwi_bytes);
    CHECK(allreduce_sweep_sizes(quick_options()) == std::vector<size_t>{8, 32});
}

TEST_CASE("a batch moves at most 1 GiB, and always one allreduce") {
    CHECK(batch_iterations(8, 20) == 20);
    CHECK(batch_iterations(size_t(64) << 20, 20) == 16);
    CHECK(batch_iterations(size_t(256) << 20, 20) == 4);
    CHECK(batch_iterations(size_t(2) << 30, 20) == 1);
    CHECK(batch_iterations(0, 3) == 3);
}

TEST_CASE("a largest size that the buffers cannot hold is bad input naming --max-bytes") {
    const size_t gib = size_t(1) << 30;
    CHECK_NOTHROW(require_sweep_fits(20 * gib, 4, 80 * gib, "4 buffers", "GPU 0's"));  // exactly full
    CHECK_NOTHROW(require_sweep_fits(64 * gib, 2, 0, "2 buffers", "this machine's"));  // memory unknown
    try {
        require_sweep_fits(64 * gib, 2, 80 * gib, "a send and a receive buffer on every GPU", "GPU 1's",
                           ", or leave via_gpu0 out");
        FAIL("64 GiB twice fits no 80 GiB");
    } catch (const UsageError& e) {
        CHECK(std::string(e.what()) ==
              "--max-bytes: the largest size, 64 GiB, needs a send and a receive buffer on every GPU, more than GPU "
              "1's 80 GiB of memory; give less than 1/2 of it, or leave via_gpu0 out");
    }
    // A part of a buffer (the ring's scratch, half a buffer on 2 GPUs) counts: 32 GiB 2.5 times is not 80 GiB.
    CHECK_NOTHROW(require_sweep_fits(32 * gib, 2.5, 80 * gib, "2.5 buffers", "GPU 0's"));
    try {
        require_sweep_fits(33 * gib, 2.5, 80 * gib, "2.5 buffers", "GPU 0's");
        FAIL("33 GiB 2.5 times fits no 80 GiB");
    } catch (const UsageError& e) {
        CHECK(std::string(e.what()).find("give less than 1/2.5 of it") != std::string::npos);
    }
}

TEST_CASE("algbw = bytes / time, busbw = algbw * 2(n-1)/n") {
    CHECK(algorithm_bandwidth(1000, 2.0) == doctest::Approx(500.0));
    CHECK(bus_bandwidth_factor(1) == 0.0);
    CHECK(bus_bandwidth_factor(2) == doctest::Approx(1.0));
    CHECK(bus_bandwidth_factor(4) == doctest::Approx(1.5));
    CHECK(bus_bandwidth_factor(8) == doctest::Approx(1.75));
    CHECK(bus_bandwidth(size_t(256) << 20, 1e-3, 4) == doctest::Approx(268435456.0 / 1e-3 * 1.5));

    SweepResult result;
    result.rows = {{1000, 1e-6, 0, ""}, {3000, 1e-6, 2, ""}};
    CHECK(result.average_bus_bandwidth(4) == doctest::Approx((1e9 + 3e9) / 2 * 1.5));
    CHECK(result.wrong_total() == 2);
    CHECK(SweepResult().average_bus_bandwidth(4) == 0.0);
}

TEST_CASE("input data: small integers, sums exact in float in any order") {
    for (int ranks = 1; ranks <= 8; ++ranks)
        for (size_t i = 0; i < 1000; ++i) {
            double exact = 0.0;
            float backwards = 0.0f;
            for (int rank = 0; rank < ranks; ++rank) {
                const float value = allreduce_input(rank, i);
                CHECK(value == std::round(value));
                CHECK(std::fabs(value) <= 8.0f);
                exact += value;
                backwards += allreduce_input(ranks - 1 - rank, i);
            }
            CHECK(static_cast<double>(allreduce_expected_sum(ranks, i)) == exact);
            CHECK(backwards == allreduce_expected_sum(ranks, i));
        }
    CHECK(allreduce_input(0, 0) != allreduce_input(1, 0));  // ranks hold different data
}

TEST_CASE("input data: a chunk read at the wrong offset is wrong at most of its elements, whatever the offset") {
    // A pattern that repeats every k elements would let a chunk land k (or any multiple) elements off
    // unseen; every offset up to 4096 elements, and some larger ones, must show.
    const int ranks = 4;
    const size_t chunk = 1024, start = 100000;
    std::vector<size_t> offsets;
    for (size_t offset = 1; offset <= 4096; ++offset) offsets.push_back(offset);
    for (const size_t offset : {size_t(1) << 16, size_t(1) << 20, size_t(3) << 24, size_t(1) << 30})
        offsets.push_back(offset);
    for (const size_t offset : offsets) {
        size_t same = 0;
        for (size_t i = start; i < start + chunk; ++i)
            same += allreduce_expected_sum(ranks, i + offset) == allreduce_expected_sum(ranks, i);
        CAPTURE(offset);
        CHECK(same < chunk / 4);  // sums of 4 values in -8..8 agree by chance about 1 time in 35
    }
}

TEST_CASE("the table: nccl-tests' columns, a note, the average bus bandwidth") {
    CHECK(sweep_table_header("ring: a ring") ==
          "\n# ring: a ring\n"
          "#       size(B)        count   type    time(us)  algbw(GB/s)  busbw(GB/s)  #wrong\n");
    const SweepRow row{786432, 43.57e-6, 3, "<- FWI gradient 384x512 floats"};
    CHECK(sweep_table_row(row, 4) ==
          "         786432       196608  float       43.57        18.05        27.07       3  <- FWI gradient 384x512 "
          "floats\n");
    CHECK(sweep_table_row({8, 51.96e-6, 0, ""}, 4) ==
          "              8            2  float       51.96         0.00         0.00       0\n");
    SweepResult result;
    result.rows = {row};
    CHECK(sweep_table_footer(result, 4) == "# Avg bus bandwidth    : 27.07 GB/s\n");
}

TEST_CASE("one process holding every rank: each size checked, warmed up and timed; the RESULT") {
    const int ranks = 4;
    const AllreduceSweepOptions options = quick_options();
    const std::vector<size_t> sizes = allreduce_sweep_sizes(options);
    HostRanks all(0, ranks, ranks, sizes.back() / sizeof(float));
    HostVariant variant(all, 0, -1);
    SweepLayout layout;
    layout.pattern = "02_allreduce_primitives";
    layout.gpus = layout.ranks = ranks;
    layout.json_path = "test_allreduce_sweep_result.json";
    std::remove(layout.json_path.c_str());

    const SweepResult result = run_allreduce_sweep(variant, options, layout);
    CHECK(result.variant == "host_sum");
    CHECK(result.skipped_because.empty());
    REQUIRE(result.rows.size() == sizes.size());
    int expected_runs = 0;
    for (size_t k = 0; k < sizes.size(); ++k) {
        const SweepRow& row = result.rows[k];
        CHECK(row.bytes == sizes[k]);
        CHECK(row.wrong == 0);
        CHECK(row.seconds == doctest::Approx(fake_seconds(sizes[k] / sizeof(float), 0)).scale(0));
        CHECK(row.note == "note " + std::to_string(sizes[k] / sizeof(float)));
        const int iters = batch_iterations(sizes[k], options.iters);
        expected_runs += 1 + std::min(options.warmup, iters) + options.repeats * iters;
    }
    CHECK(variant.runs == expected_runs);
    CHECK(variant.setups == static_cast<int>(sizes.size()) * (1 + options.repeats));
    CHECK(result.wrong_total() == 0);

    const std::string json = sweep_result_json(result, layout).str();
    CHECK(json.find("{\"kind\": \"allreduce_sweep\", \"pattern\": \"02_allreduce_primitives\", \"variant\": "
                    "\"host_sum\", \"gpus\": 4, \"ranks\": 4, \"sizes\": ") == 0);
    const double seconds = result.rows[0].seconds;
    const std::string first_size = "{\"bytes\": 8, \"count\": 2, \"time_s\": " + JsonValue(seconds).str() +
                                   ", \"algbw_GBps\": " + JsonValue(algorithm_bandwidth(8, seconds) / 1e9).str() +
                                   ", \"busbw_GBps\": " + JsonValue(bus_bandwidth(8, seconds, ranks) / 1e9).str() +
                                   ", \"wrong\": 0}";
    CHECK(json.find(first_size) != std::string::npos);
    CHECK(json.find("{\"bytes\": 32, \"count\": 8, ") != std::string::npos);
    const std::string last_fields =
        "\"avg_busbw_GBps\": " + JsonValue(result.average_bus_bandwidth(ranks) / 1e9).str() +
        ", \"wrong_total\": 0, \"verified\": true";
    CHECK(json.size() - json.rfind(last_fields) == last_fields.size() + 1);  // then the closing brace

    // The RESULT written to --json carries the same fields.
    const std::string written = read_file(layout.json_path);
    CHECK(written.find("\"kind\": \"allreduce_sweep\"") != std::string::npos);
    CHECK(written.find(first_size) != std::string::npos);
    CHECK(written.find(last_fields) != std::string::npos);
    std::remove(layout.json_path.c_str());
}

TEST_CASE("the warm-up is at most one batch's worth of allreduces") {
    const AllreduceSweepOptions options = parsed({"--max-bytes", "64", "--step-factor", "4", "--iters", "2"});
    REQUIRE(options.warmup > options.iters);  // the default warm-up, 5, is more than a batch of 2
    const std::vector<size_t> sizes = allreduce_sweep_sizes(options);
    HostRanks all(0, 2, 2, sizes.back() / sizeof(float));
    HostVariant variant(all, 0, -1);
    SweepLayout layout;
    layout.reports = false;
    run_allreduce_sweep(variant, options, layout);
    // Per size: the checked call, a warm-up of one batch (2), and the timed batches.
    CHECK(variant.runs == static_cast<int>(sizes.size()) * (1 + 2 + options.repeats * 2));
}

TEST_CASE("a variant that leaves an element unwritten is counted in #wrong, every size") {
    const int ranks = 3;
    const AllreduceSweepOptions options = quick_options();
    HostRanks all(0, ranks, ranks, allreduce_sweep_sizes(options).back() / sizeof(float));
    HostVariant variant(all, 0, 2);
    SweepLayout layout;
    layout.gpus = layout.ranks = ranks;
    layout.reports = false;
    const SweepResult result = run_allreduce_sweep(variant, options, layout);
    for (const SweepRow& row : result.rows) CHECK(row.wrong == 1);
    CHECK(result.wrong_total() == static_cast<long long>(result.rows.size()));
    CHECK(sweep_result_json(result, layout).str().find("\"verified\": false") != std::string::npos);
}

TEST_CASE("an allreduce that goes wrong only after another is counted: the last batch is checked too") {
    // Right in a size's first, checked allreduce; from then on it leaves the last element of its results
    // unwritten, as an allreduce that reused a buffer before the one before it was done with it might.
    struct WrongAfterTheFirst final : HostVariant {
        using HostVariant::HostVariant;
        void setup(size_t count) override {
            if (count != count_) runs_of_this_size = 0;
            count_ = count;
            HostVariant::setup(count);
        }
        void exchange_and_sum(size_t count) override {
            std::vector<const float*> inputs;
            for (const auto& input : mine_.send) inputs.push_back(input.data());
            mine_.sum(inputs, count, ++runs_of_this_size > 1 ? 0 : -1);
        }
        size_t count_ = 0;
        int runs_of_this_size = 0;
    };
    const AllreduceSweepOptions options = quick_options();
    HostRanks all(0, 2, 2, allreduce_sweep_sizes(options).back() / sizeof(float));
    WrongAfterTheFirst variant(all, 0, -1);
    SweepLayout layout;
    layout.gpus = layout.ranks = 2;
    layout.reports = false;
    const SweepResult result = run_allreduce_sweep(variant, options, layout);
    for (const SweepRow& row : result.rows) CHECK(row.wrong == 1);
    CHECK(variant.checks == 2 * static_cast<int>(result.rows.size()));

    // A variant that sums in place holds n^k times the sum after k allreduces: only the first is checked.
    struct InPlace final : HostVariant {
        using HostVariant::HostVariant;
        bool sums_in_place() const override { return true; }
    };
    InPlace in_place(all, 0, -1);
    const SweepResult in_place_result = run_allreduce_sweep(in_place, options, layout);
    for (const SweepRow& row : in_place_result.rows) CHECK(row.wrong == 0);
    CHECK(in_place.checks == static_cast<int>(in_place_result.rows.size()));
}

TEST_CASE("a variant that cannot run is skipped with its reason") {
    struct Unavailable final : HostVariant {
        using HostVariant::HostVariant;
        std::string unavailable_reason() const override { return "needs peers"; }
    };
    HostRanks all(0, 2, 2, 64);
    Unavailable variant(all, 0, -1);
    const SweepResult result = run_allreduce_sweep(variant, quick_options(), SweepLayout{});
    CHECK(result.skipped_because == "needs peers");
    CHECK(result.rows.empty());
    CHECK(variant.runs == 0);
}

TEST_CASE("one rank per participant: the slowest rank's time, #wrong summed, the same result on every rank") {
    const int ranks = 3;
    const AllreduceSweepOptions options = quick_options();
    const size_t capacity = allreduce_sweep_sizes(options).back() / sizeof(float);
    for (const int skip_rank : {-1, 1}) {
        CAPTURE(skip_rank);
        Wire wire(ranks);
        std::vector<HostRanks> mine;
        for (int rank = 0; rank < ranks; ++rank) mine.emplace_back(rank, 1, ranks, capacity);
        std::vector<std::unique_ptr<ThreadRankVariant>> variants;
        for (int rank = 0; rank < ranks; ++rank)
            variants.push_back(std::make_unique<ThreadRankVariant>(mine[rank], rank, skip_rank, wire));
        const std::vector<SweepResult> results = sweep_on_threads(variants, wire, options);

        const std::vector<size_t> sizes = allreduce_sweep_sizes(options);
        for (int rank = 0; rank < ranks; ++rank) {
            CAPTURE(rank);
            REQUIRE(results[rank].rows.size() == sizes.size());
            for (size_t k = 0; k < sizes.size(); ++k) {
                const SweepRow& row = results[rank].rows[k];
                // scale(0): a relative tolerance (the default scale of 1 would pass any time of a few us).
                CHECK(row.seconds == doctest::Approx(fake_seconds(sizes[k] / sizeof(float), ranks - 1)).scale(0));
                CHECK(row.wrong == (skip_rank < 0 ? 0 : 1));
            }
            // Every timed batch starts after the ranks lined up (a reduce between its setup and its start).
            CHECK(variants[rank]->batches == static_cast<int>(sizes.size()) * options.repeats);
            CHECK(variants[rank]->batches_not_lined_up == 0);
        }
    }
}

TEST_CASE("--isolated: each allreduce timed alone after the ranks line up; the median, the slowest rank's") {
    const int ranks = 3;
    AllreduceSweepOptions options = quick_options();
    options.isolated = true;
    const std::vector<size_t> sizes = allreduce_sweep_sizes(options);
    Wire wire(ranks);
    std::vector<HostRanks> mine;
    for (int rank = 0; rank < ranks; ++rank) mine.emplace_back(rank, 1, ranks, sizes.back() / sizeof(float));
    std::vector<std::unique_ptr<ThreadRankVariant>> variants;
    for (int rank = 0; rank < ranks; ++rank)
        variants.push_back(std::make_unique<ThreadRankVariant>(mine[rank], rank, -1, wire));
    const std::vector<SweepResult> results = sweep_on_threads(variants, wire, options);

    for (int rank = 0; rank < ranks; ++rank) {
        CAPTURE(rank);
        REQUIRE(results[rank].rows.size() == sizes.size());
        int expected_alone = 0, expected_runs = 0;
        for (size_t k = 0; k < sizes.size(); ++k) {
            const SweepRow& row = results[rank].rows[k];
            // Every call has one slow rank, so each call's slowest takes kSlowCall more, plus the fake
            // time of the slow rank; each rank's median would leave kSlowCall out.
            const size_t count = sizes[k] / sizeof(float);
            CHECK(row.seconds >= kFakeHostLatency + ThreadRankVariant::kSlowCall + fake_seconds(count, 0));
            CHECK(row.seconds <= kFakeHostLatency + ThreadRankVariant::kSlowCall + fake_seconds(count, ranks - 1));
            CHECK(row.wrong == 0);
            const int iters = batch_iterations(sizes[k], options.iters);
            expected_alone += options.repeats * iters;
            expected_runs += 1 + std::min(options.warmup, iters) + options.repeats * iters;
        }
        CHECK(variants[rank]->timed_alone == expected_alone);
        CHECK(variants[rank]->runs == expected_runs);  // the checked allreduce and the warm-up as without it
        CHECK(variants[rank]->setups == static_cast<int>(sizes.size()) * (1 + options.repeats));
        CHECK(variants[rank]->batches == 0);
        CHECK(variants[rank]->alone_not_lined_up == 0);
    }
}

TEST_CASE("an allreduce timed alone: the host's clock from the call to the end of its wait") {
    // The variants' own time_alone, not the fakes': run() takes 10 ms, wait() 20 ms.
    struct SlowToFinish final : HostVariant {
        using HostVariant::HostVariant;
        void exchange_and_sum(size_t count) override {
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
            HostVariant::exchange_and_sum(count);
        }
        void wait() override {
            ++waits;
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        double time_alone(size_t count) override { return AllreduceSweepVariant::time_alone(count); }
        int waits = 0;
    };
    HostRanks all(0, 2, 2, 64);
    SlowToFinish variant(all, 0, -1);
    variant.setup(64);
    const double seconds = variant.time_alone(64);
    CHECK(seconds >= 0.030);
    CHECK(variant.runs == 1);
    CHECK(variant.waits == 1);
    CHECK(all.count_wrong(64) == 0);
}
