// The allreduce sweep of 02, 03 and 05 (and doctor's check 5), in nccl-tests' shape: this harness owns
// the flags, the sizes, the warm-up, the timing, the tally of the checks, the table and the RESULT; a
// variant supplies only what differs, how it sets up, runs and checks one allreduce (nccl-tests' one
// small file per collective).
// Both layouts run through it: one process driving several GPUs (02: the process is the only
// participant) and one rank per GPU (03, 05: every rank is a participant and runs the same sweep). The
// ranks agree on times and #wrong through a reduce they inject, so this file needs neither MPI nor NCCL.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "cli.hpp"
#include "output.hpp"
#include "stencil.hpp"  // FWI_HD: __host__ __device__ under nvcc
#include "timing.hpp"

namespace fwi {

// ---- flags and sizes ---------------------------------------------------------------------------------

struct AllreduceSweepOptions {
    long long min_bytes = 8;  // 64-bit: sweeps go past 2 GiB (-e 4G)
    long long max_bytes = 256 << 20;
    double step_factor = 2.0;
    int warmup = 5;   // untimed allreduces per size before timing (at most one batch's worth)
    int iters = 20;   // allreduces per batch (fewer when a batch would move more than 1 GiB)
    int repeats = 5;  // batches per size, each from fresh inputs; the median time is reported
    // --isolated: each allreduce of a batch timed alone, the way a run times its combine phase (the
    // participants line up, then the host's clock runs from the call to the end of its wait), instead of
    // each batch timed as a whole, its calls back to back (nccl-tests' way, the GPU's time per call). The
    // scaling model takes its combine from sweeps timed so (scripts/compare.sh): a run's combine includes
    // the call's issue and how late the polling wait sees its end, which a batch hides behind the calls
    // before it.
    bool isolated = false;
};

// The largest size --max-bytes allows.
constexpr long long kMaxSweepBytes = 64LL << 30;
// --iters' limit. A timed batch is queued on a stream without a wait in between, and a stream holds only
// about 1000 launches behind work that has not finished (1021 on an H100 with CUDA 13) before the host
// blocks inside the next launch, where no time limit reaches: with a peer that stalls, a longer batch of
// NCCL's allreduce (one launch per call) would hang there instead of ending with the timed wait's
// message. (02's ring queues several copies and kernels per call; its peers are GPUs of this process.)
constexpr int kMaxBatchIterations = 500;

// --min-bytes, --max-bytes (sizes with K, M, G: powers of 1024), --step-factor, --iters, --warmup,
// --repeats, --isolated, with nccl-tests' short names: -b, -e, -f, -n, -w; and -g for --gpus where the program
// registered --gpus before this call (02; 03 and 05 run one GPU per rank and have no --gpus). Where the
// sweep runs only on request (03 and 05: --bench-allreduce), `requested` is that switch's target and the
// sweep's flags are refused without it.
void add_allreduce_sweep_flags(ArgParser& parser, AllreduceSweepOptions& options, const bool* requested = nullptr);

// Where --bench-allreduce (`bench`) runs the sweep instead of the FWI (03, 05): the FWI's flags, the
// problem's (`problem_flags`, from add_problem_flags) with --iterations and --no-reference, are refused
// with it, since the sweep times the combine alone at the default problem's gradient size.
void refuse_fwi_flags_with_bench(ArgParser& parser, std::vector<std::string> problem_flags, const bool* bench);

// What the flags' own ranges cannot check (--min-bytes at most --max-bytes): UsageError naming the flags.
void validate_allreduce_sweep_options(const AllreduceSweepOptions& options);

// min, min*f, min*f^2, ... up to max, each rounded down to whole floats, plus `extra_bytes` when it lies
// in [min, max]; ascending, without duplicates.
std::vector<size_t> sweep_byte_sizes(size_t min_bytes, size_t max_bytes, double step_factor, size_t extra_bytes);

// The gradient of the default problem: every sweep includes that size and marks its row with
// fwi_gradient_marker ("<- FWI gradient 384x512 floats"; empty for any other size).
size_t fwi_gradient_bytes();
std::string fwi_gradient_marker(size_t bytes);

// The sizes a sweep with these options runs; the last is the largest buffer a variant needs.
std::vector<size_t> allreduce_sweep_sizes(const AllreduceSweepOptions& options);

// A sweep whose largest size, held `buffers` times (2.5: a send, a receive and half of one more), is more
// than `capacity_bytes` of memory is bad input:
// a UsageError naming --max-bytes, rather than a failed allocation blamed on other processes. `needs` says
// what the buffers are ("a send and a receive buffer on every GPU"), `memory` whose memory it is ("GPU 0's",
// "this machine's"), `or_else` any other way out (", or leave via_gpu0 out of --variants").
void require_sweep_fits(size_t largest_bytes, double buffers, size_t capacity_bytes, const std::string& needs,
                        const std::string& memory, const std::string& or_else = "");

// Allreduces in one timed batch of `bytes`: `iters`, fewer when a batch would move more than 1 GiB.
int batch_iterations(size_t bytes, int iters);

// ---- the data every variant reduces ------------------------------------------------------------------

// Rank r's element i: an integer in -8..8, so every partial sum is exact in float whatever the order of
// the additions, and a right result equals the expected sum bit for bit. The integer is a hash of the whole
// index (a multiply, and the high bits folded down), not a pattern that repeats: a chunk summed into or
// copied to the wrong offset then reads wrong at almost every element, whatever the offset.
FWI_HD float allreduce_input(int rank, size_t index) {
    // Odd multipliers (2^64 / golden ratio, and another), so that neither the index nor the rank repeats.
    unsigned long long mixed = static_cast<unsigned long long>(index) * 0x9E3779B97F4A7C15ull +
                               static_cast<unsigned long long>(rank + 1) * 0xC2B2AE3D27D4EB4Full;
    mixed ^= mixed >> 29;
    return static_cast<float>(static_cast<int>(mixed % 17) - 8);
}

FWI_HD float allreduce_expected_sum(int ranks, size_t index) {
    float sum = 0.0f;
    for (int rank = 0; rank < ranks; ++rank) sum += allreduce_input(rank, index);
    return sum;
}

// ---- a variant ---------------------------------------------------------------------------------------

// What one participant runs: in 02 the allreduce over all of the process's GPUs, in 03 and 05 this
// rank's part of it. Every wait inside has the program's timeout.
class AllreduceSweepVariant {
public:
    virtual ~AllreduceSweepVariant() = default;
    // The name in the table's title and the RESULT ("ring", "pipelined 1024KiB x2"), and how it works.
    virtual std::string name() const = 0;
    virtual std::string description() const = 0;
    // Why it cannot run here (the sweep then says so and skips it); empty when it can.
    virtual std::string unavailable_reason() const { return ""; }
    // Fills the inputs of the ranks this participant drives (allreduce_input) for `count` floats and, where
    // the results are apart from the inputs, poisons them with NaN, so that elements an allreduce leaves
    // unwritten count as wrong.
    virtual void setup(size_t count) = 0;
    // Starts one allreduce of the first `count` floats; it may return before the allreduce is done.
    virtual void run(size_t count) = 0;
    // Returns once everything setup() and run() started is done.
    virtual void wait() = 0;
    // Elements of this participant's results that differ from the exact sum of the inputs the variant
    // wrote (allreduce_expected_sum for allreduce_input), after wait().
    virtual long long count_wrong(size_t count) = 0;
    // Whether the results overwrite the inputs (03's combine sums its buffer in place). Such results grow
    // n-fold with every allreduce after the first, so only a size's first allreduce is checked; results apart
    // from the inputs are checked again after the timed batches, which start from poisoned results, so
    // that an allreduce that goes wrong only when it follows another (a buffer reused too early) counts.
    virtual bool sums_in_place() const { return false; }
    // Text for the end of this size's row (the algorithm chosen at this size, where the time went), asked
    // once after the size's runs.
    virtual std::string row_note(size_t /*count*/) { return ""; }
    // A timed batch: begin_batch() before its first run(), end_batch() after its last, which waits and
    // returns the batch's time. By default the host clock around the runs and wait(). Variants whose
    // run() only queues GPU work time the batch with CUDA events on their streams instead, so that the
    // time does not include how late wait(), which polls, notices the end.
    virtual void begin_batch() { batch_clock_.restart(); }
    virtual double end_batch() {
        wait();
        return batch_clock_.seconds();
    }
    // One allreduce timed alone (--isolated), on the host's clock whatever the variant's batches use: from
    // the call to the end of wait(), as a run's combine phase is timed. (Virtual only for the tests' fake
    // clock.)
    virtual double time_alone(size_t count) {
        HostTimer clock;
        run(count);
        wait();
        return clock.seconds();
    }

private:
    HostTimer batch_clock_;
};

// ---- the layout --------------------------------------------------------------------------------------

enum class ReduceOp { sum, max };

// Reduces `values` element-wise over the participants, the result on every participant (MPI or NCCL,
// each with its timeout).
using ReduceOverParticipants = std::function<void(std::vector<double>& values, ReduceOp op)>;

struct SweepLayout {
    std::string pattern;  // the program: "02_allreduce_primitives", "03_host_staged_mpi", "05_nccl_mpi"
    int gpus = 1;         // distinct GPUs taking part
    int ranks = 1;        // members of the allreduce, the n of busbw: 02's GPUs, 03's and 05's MPI ranks
    bool reports = true;  // this participant prints the tables and the RESULT lines (rank 0)
    // One rank per GPU: how the ranks combine their times (the slowest counts) and #wrong (summed).
    // Empty for one process, the only participant.
    ReduceOverParticipants reduce;
    std::string json_path;  // --json: where the RESULT object is also written
};

// ---- the results -------------------------------------------------------------------------------------

struct SweepRow {
    size_t bytes = 0;
    double seconds = 0.0;  // one allreduce: the median over the batches (or, --isolated, over the allreduces
                           // timed alone) of the slowest participant's time
    long long wrong = 0;   // over all participants
    std::string note;      // the variant's row note, and the FWI gradient's marker
};

struct SweepResult {
    std::string variant;
    std::string skipped_because;  // empty when it ran
    std::vector<SweepRow> rows;   // one per size, ascending
    long long wrong_total() const;
    double average_bus_bandwidth(int ranks) const;  // bytes/s, the mean over the rows
};

// ---- the sweep ---------------------------------------------------------------------------------------

// Every size of allreduce_sweep_sizes(options): setup, one allreduce and its check (#wrong); `warmup`
// untimed allreduces (no more than a batch's); `repeats` batches, each started from fresh inputs (a
// variant that sums in place grows its data n-fold per allreduce) and, with several participants, by all
// of them together; then, unless the variant sums in place, the last batch's results checked too.
// --isolated times each allreduce of a batch alone, the participants lined up before each, and reports the
// median of those times. The participant that reports prints the table and emits the RESULT. Collective:
// every participant calls it with the same options; the result is the same on each.
SweepResult run_allreduce_sweep(AllreduceSweepVariant& variant, const AllreduceSweepOptions& options,
                                const SweepLayout& layout);
// After each variant's sweep, with several variants: the --json file keeps the last variant's RESULT, or
// the first one with wrong elements (later sweeps no longer write it), so that it never says "#wrong 0"
// of a run that exits 1.
void keep_json_of_first_wrong_sweep(SweepLayout& layout, const SweepResult& result);

// One size of that sweep, measured the same way (setup, one checked allreduce, the warm-up, `repeats` timed
// batches of batch_iterations(bytes, iters) allreduces, the median, each allreduce timed alone with
// --isolated, the last batch checked), without printing anything: doctor's NCCL check times its few sizes
// with it.
SweepRow measure_allreduce_size(AllreduceSweepVariant& variant, size_t bytes, const AllreduceSweepOptions& options,
                                const SweepLayout& layout);

// The parts of the table (nccl-tests' columns) and the RESULT object, as run_allreduce_sweep prints them.
std::string sweep_table_header(const std::string& title);
std::string sweep_table_row(const SweepRow& row, int ranks);
std::string sweep_table_footer(const SweepResult& result, int ranks);
JsonObject sweep_result_json(const SweepResult& result, const SweepLayout& layout);

}  // namespace fwi
