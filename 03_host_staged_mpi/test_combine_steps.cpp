// The host-side logic of every combine variant, on the CPU under mpirun with 1 to 4 ranks (CTest labels
// cpu;mpi). A host buffer stands in for device memory, and the stand-in copies are as unhelpful as the
// rules allow: a to-host copy happens only when its arrival is asked about (as late as possible), a
// to-device copy reads the staging buffer the moment it is started (as early as possible). A schedule that
// reads a chunk before it arrived, or copies it back before its sum is done, gives wrong numbers here.
// Checked with the classic values: rank r contributes r + 0.001 i; the sum is W (W-1)/2 + 0.001 i W,
// identical on every rank.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <mpi.h>
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>  // Open MPI: MPIX_CUDA_AWARE_SUPPORT, MPIX_Query_cuda_support
#endif

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "combine_steps.hpp"
#include "errors.hpp"
#include "mpi_env.hpp"
#include "registered_ranks.hpp"
#include "variants.hpp"

using namespace fwi;

namespace {

// The classic allreduce check: rank r contributes r + 0.001 i at element i, so over W ranks the sum is
// W (W-1)/2 + 0.001 i W.
std::vector<float> classic_contribution(int rank, size_t count) {
    std::vector<float> values(count);
    for (size_t i = 0; i < count; ++i) values[i] = float(rank) + 0.001f * float(i);
    return values;
}

double classic_sum(int ranks, size_t i) { return ranks * (ranks - 1) / 2.0 + 0.001 * double(i) * ranks; }

// Elements that differ from the classic sum by more than float rounding of the inputs and of the W-1
// additions (far below 1e-6 relative, whatever the order MPI adds in).
long long count_wrong_sums(const float* values, size_t count, int ranks) {
    long long wrong = 0;
    for (size_t i = 0; i < count; ++i) {
        const double expected = classic_sum(ranks, i);
        wrong += !(std::abs(double(values[i]) - expected) <= 1e-6 * std::max(1.0, std::abs(expected)));
    }
    return wrong;
}

class LazyHostCopies final : public StagingCopies {
public:
    LazyHostCopies(float* device, size_t count)
        : device_(device), host_(count, std::numeric_limits<float>::quiet_NaN()) {}

    float* host() override { return host_.data(); }
    void begin(size_t chunks) override {
        pending_.clear();
        arrived_.assign(chunks, false);
        to_device_order.clear();
        most_sums_in_flight = 0;
        to_host_started_ = 0;
        waited_on_device = false;
    }
    void start_to_host(size_t index, const Chunk& chunk) override {
        REQUIRE(index == to_host_started_++);
        pending_.push_back(chunk);
    }
    bool arrived_on_host(size_t index) override {
        not_yet_ = !not_yet_;  // every other question gets "not yet", so the waiting paths run too
        if (not_yet_) return false;
        arrive_up_to(index);
        return true;
    }
    void wait_on_host(size_t index) override { arrive_up_to(index); }
    void start_to_device(size_t index, const Chunk& chunk) override {
        REQUIRE(index < arrived_.size());
        CHECK(arrived_[index]);  // its sum was done on the host, so it must have arrived first
        // The next chunk's to-host copy was queued before this chunk's sum started: the lane runs ahead.
        CHECK(to_host_started_ >= std::min(index + 2, arrived_.size()));
        // A chunk's sum starts once it has arrived and ends when it is copied back: the chunks that arrived
        // and are not back yet, this one included, are the sums in flight.
        const size_t arrived = size_t(std::count(arrived_.begin(), arrived_.end(), true));
        most_sums_in_flight = std::max(most_sums_in_flight, arrived - to_device_order.size());
        to_device_order.push_back(index);
        std::memcpy(device_ + chunk.offset, host_.data() + chunk.offset, chunk.count * sizeof(float));
    }
    void wait_on_device() override { waited_on_device = true; }
    double to_host_busy_seconds() override { return 0.0; }
    double to_device_busy_seconds() override { return 0.0; }

    std::vector<size_t> to_device_order;
    size_t most_sums_in_flight = 0;
    bool waited_on_device = false;

private:
    void arrive_up_to(size_t index) {
        for (size_t k = 0; k <= index; ++k) {
            if (arrived_[k]) continue;
            const Chunk& chunk = pending_.at(k);
            std::memcpy(host_.data() + chunk.offset, device_ + chunk.offset, chunk.count * sizeof(float));
            arrived_[k] = true;
        }
    }

    float* device_;
    std::vector<float> host_;
    std::vector<Chunk> pending_;
    std::vector<bool> arrived_;
    size_t to_host_started_ = 0;
    bool not_yet_ = false;
};

// The sum on every element, and the same bits on every rank.
void check_classic_sum(const std::vector<float>& values) {
    CHECK(count_wrong_sums(values.data(), values.size(), world_size()) == 0);
    std::vector<float> rank0 = values;
    MPI_Bcast(rank0.data(), int(rank0.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
    CHECK(std::memcmp(rank0.data(), values.data(), values.size() * sizeof(float)) == 0);
}

}  // namespace

TEST_CASE("chunk ranges cover the buffer in order, the last chunk shorter") {
    const std::vector<Chunk> chunks = chunk_ranges(10, 4);
    REQUIRE(chunks.size() == 3);
    CHECK(chunks[0].offset == 0);
    CHECK(chunks[2].offset == 8);
    CHECK(chunks[2].count == 2);
    CHECK(chunk_ranges(10, 0).size() == 1);
    CHECK(chunk_ranges(0, 4).empty());
    for (size_t total : {1u, 7u, 64u, 1000u})
        for (size_t chunk : {1u, 3u, 64u, 5000u}) {
            size_t next = 0;
            for (const Chunk& c : chunk_ranges(total, chunk)) {
                CHECK(c.offset == next);
                CHECK(c.count >= 1);
                CHECK(c.count <= chunk);
                next += c.count;
            }
            CHECK(next == total);
        }
}

TEST_CASE("the sum is W (W-1)/2 + 0.001 i W, whole and in uneven chunks, identical on every rank") {
    for (size_t chunk : {size_t(0), size_t(777), size_t(259), size_t(100), size_t(333)}) {  // 259: 3 whole chunks
        CAPTURE(chunk);
        std::vector<float> values = classic_contribution(world_rank(), 777);
        for (const Chunk& c : chunk_ranges(values.size(), chunk))
            sum_chunk_over_ranks(values.data(), c, MPI_COMM_WORLD);
        check_classic_sum(values);
    }
}

TEST_CASE("pageable and pinned: one copy down, one MPI_Allreduce, one copy up") {
    for (size_t count : {size_t(1), size_t(1000), size_t(4099)}) {
        CAPTURE(count);
        std::vector<float> device = classic_contribution(world_rank(), count);
        LazyHostCopies copies(device.data(), count);
        const CombineTimes times = combine_whole(copies, count, MPI_COMM_WORLD);
        check_classic_sum(device);
        CHECK(copies.to_device_order == std::vector<size_t>{0});
        CHECK(copies.waited_on_device);
        CHECK(times.wall >= times.mpi);
    }
}

TEST_CASE("pipelined: chunk sizes that do and do not divide the buffer, 1 to 8 MPI operations in flight") {
    for (size_t count : {size_t(1), size_t(9), size_t(1000), size_t(1001), size_t(4099)})
        for (size_t chunk : {size_t(0), size_t(1), size_t(7), size_t(333), size_t(1000), size_t(5000)})
            for (int in_flight : {1, 2, 3, 8}) {
                // 9 chunks of 1 float show what 1-float chunks do (more chunks than operations in flight);
                // thousands of them only cost time, minutes on a loaded machine with 4 ranks on 2 cores.
                if (chunk == 1 && count > 9) continue;
                CAPTURE(count);
                CAPTURE(chunk);
                CAPTURE(in_flight);
                std::vector<float> device = classic_contribution(world_rank(), count);
                LazyHostCopies copies(device.data(), count);
                const CombineTimes times =
                    combine_pipelined(copies, count, PipelineSettings{chunk, in_flight}, MPI_COMM_WORLD);
                check_classic_sum(device);
                CHECK(copies.most_sums_in_flight <= size_t(in_flight));
                CHECK(times.mpi <= times.wall);  // time with a sum in progress, overlapping sums counted once
                // Each chunk goes back exactly once, in order (the sums finish in the order they started).
                const size_t chunks = chunk_ranges(count, chunk).size();
                REQUIRE(copies.to_device_order.size() == chunks);
                for (size_t k = 0; k < chunks; ++k) CHECK(copies.to_device_order[k] == k);
                CHECK(copies.waited_on_device);
            }
}

TEST_CASE("a pipelined combine can run again on the same copies (the next iteration)") {
    const size_t count = 1001;
    std::vector<float> device = classic_contribution(world_rank(), count);
    LazyHostCopies copies(device.data(), count);
    combine_pipelined(copies, count, PipelineSettings{100, 2}, MPI_COMM_WORLD);
    const std::vector<float> fresh = classic_contribution(world_rank(), count);
    std::copy(fresh.begin(), fresh.end(), device.begin());  // in place: the copies hold its address
    combine_pipelined(copies, count, PipelineSettings{100, 2}, MPI_COMM_WORLD);
    check_classic_sum(device);
}

TEST_CASE("cuda_aware's logic: the buffer straight to MPI_Allreduce (a host buffer here)") {
    std::vector<float> values = classic_contribution(world_rank(), 777);
    combine_cuda_aware(values.data(), values.size(), MPI_COMM_WORLD);
    check_classic_sum(values);
}

TEST_CASE("cuda_aware is refused with a reason unless MPI reports CUDA support") {
    const std::string reason = cuda_aware_unavailable_reason(60.0);
    MESSAGE("cuda_aware here: " << (reason.empty() ? "available" : reason));
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
    CHECK(reason.empty() == (MPIX_Query_cuda_support() == 1));  // every rank runs the same MPI here
#else
    CHECK_FALSE(reason.empty());  // built without CUDA support, or an MPI that does not say
#endif
}

TEST_CASE("the classic check counts wrong elements") {
    const int ranks = 3;
    std::vector<float> values(100);
    for (size_t i = 0; i < values.size(); ++i) values[i] = float(classic_sum(ranks, i));
    CHECK(count_wrong_sums(values.data(), values.size(), ranks) == 0);
    values[5] += 0.01f;
    values[50] = std::numeric_limits<float>::quiet_NaN();
    CHECK(count_wrong_sums(values.data(), values.size(), ranks) == 2);
}

TEST_CASE("variant lists: all, pipelined once per chunk size and depth, bad input names the flag") {
    const std::vector<VariantSpec> all = variant_specs("all", "256,1024", "1,4");
    REQUIRE(all.size() == 3 + 4);
    CHECK(all[0].label() == "pageable");
    CHECK(all[2].label() == "pipelined 256KiB x1");
    CHECK(all[2].pipeline.chunk_elements == 256 * 1024 / 4);
    CHECK(all[5].label() == "pipelined 1024KiB x4");
    CHECK(all[6].name == "cuda_aware");
    CHECK(variant_specs("pinned", "1024", "1").size() == 1);
    const auto message_of = [](auto&& call) -> std::string {
        try {
            call();
        } catch (const UsageError& e) {
            return e.what();
        }
        return "";
    };
    CHECK(message_of([] { variant_specs("pinned,bogus", "1024", "1"); }).find("--combine") == 0);
    CHECK(message_of([] { variant_specs("all", "0", "1"); }).find("--chunk-kb") == 0);
    CHECK(message_of([] { variant_specs("all", "12x", "1"); }).find("--chunk-kb") == 0);
    CHECK(message_of([] { variant_specs("all", "1024", "1,,2"); }).find("--in-flight") == 0);
    CHECK(message_of([] { variant_specs("all", "1024", "65"); }).find("--in-flight") == 0);
    // The same variant twice would run twice under one name.
    CHECK(message_of([] { variant_specs("pinned,pinned", "1024", "1"); }) == "--combine: 'pinned' is listed twice");
    CHECK(message_of([] { variant_specs("all", "64,064", "1"); }) == "--chunk-kb: 64 is listed twice");
    CHECK(message_of([] { variant_specs("all", "1024", "2,1,2"); }) == "--in-flight: 2 is listed twice");
}

int main(int argc, char** argv) {
    return run_mpi_program("test_combine_steps", argc, argv, [&] {
        if (!world_has_registered_ranks(argc, argv)) return 1;
        doctest::Context context(argc, argv);
        const int failed = context.run();
        int any_failed = 0;
        MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        return any_failed ? 1 : 0;
    });
}
