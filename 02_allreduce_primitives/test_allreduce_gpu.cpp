// Every allreduce variant gives the exact sum on 1, 2 and all GPUs, for odd element counts and sizes
// below the ring's chunk size and the p2p kernels' vector width; both p2p_kernel algorithms; back-to-back
// runs (no missing dependency between calls); and with peer access left off, as on a machine without P2P.
// Needs GPUs: exits 77 (skipped) without.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "allreduce_sweep.hpp"
#include "allreduce_variant.hpp"
#include "device.hpp"
#include "errors.hpp"
#include "gpu_group.hpp"
#include "selected_test_cases.hpp"

using namespace fwi;

namespace {

// Odd counts, sizes under one 16-byte vector, under the ring's 256 KiB chunk, and over several chunks.
const std::vector<size_t> kCounts{1, 3, 5, 7, 33, 1001, 4099, 65537, (1 << 20) + 3};

struct Case {
    std::string variant;
    VariantOptions options;
    std::string label;
};

std::vector<Case> all_cases() {
    VariantOptions one_shot, two_shot, fine_ring;
    one_shot.one_shot_max_bytes = size_t(1) << 30;
    two_shot.one_shot_max_bytes = 0;
    fine_ring.ring_chunks = 16;
    return {{"via_gpu0", {}, "via_gpu0"},
            {"ring", {}, "ring"},
            {"ring", fine_ring, "ring, 16 chunks"},
            {"p2p_kernel", one_shot, "p2p_kernel one-shot"},
            {"p2p_kernel", two_shot, "p2p_kernel two-shot"},
            {"nccl", {}, "nccl"}};
}

// One allreduce into poisoned results; the wrong elements over all GPUs.
long long run_once_and_count_wrong(AllreduceVariant& variant, size_t count) {
    variant.setup(count);
    variant.run(count);
    variant.wait();
    return variant.count_wrong(count);
}

// Several allreduces back to back leave the right sum: no missing dependency between one call and the
// next (the sweep times such batches but checks a single call).
long long run_back_to_back_and_count_wrong(AllreduceVariant& variant, size_t count) {
    variant.setup(count);
    for (int i = 0; i < 5; ++i) variant.run(count);
    variant.wait();
    return variant.count_wrong(count);
}

void check_every_variant(int gpus, PeerAccess peer_access = PeerAccess::enable) {
    GpuGroup group(gpus, 30.0, peer_access);
    group.reserve(kCounts.back());
    const bool every_pair_has_peer_access = group.pairs_without_peer_access().empty();
    if (peer_access == PeerAccess::leave_off && gpus > 1) CHECK_FALSE(every_pair_has_peer_access);
    // Where CUDA says every pair may have peer access, the group must have turned it on: else the P2P
    // variant would be left out below, and the ring would take its staged path, unseen.
    if (peer_access == PeerAccess::enable) CHECK(every_pair_has_peer_access == fwi::every_pair_has_peer_access(gpus));
    for (const Case& c : all_cases()) {
        CAPTURE(c.label);
        const auto variant = make_variant(c.variant, group, c.options);
        const std::string reason = variant->unavailable_reason();
        const bool needs_two = c.variant == "ring" || c.variant == "p2p_kernel";
        const bool needs_peers = c.variant == "p2p_kernel";  // its kernels read the other GPUs' memory
        if ((needs_two && gpus == 1) || (needs_peers && !every_pair_has_peer_access)) {
            CHECK_MESSAGE(!reason.empty(), "a P2P variant must say why it cannot run");
            MESSAGE(c.label << " skipped on " << gpus << " GPU(s): " << reason);
            continue;
        }
        REQUIRE(reason.empty());
        for (size_t count : kCounts) {
            CAPTURE(count);
            CHECK(run_once_and_count_wrong(*variant, count) == 0);
            CHECK(run_back_to_back_and_count_wrong(*variant, count) == 0);
        }
        AllreduceSweepOptions quick;
        quick.min_bytes = quick.max_bytes = 4099 * 4;
        quick.warmup = 2;
        quick.iters = 5;
        quick.repeats = 2;
        SweepLayout layout;
        layout.gpus = layout.ranks = gpus;
        layout.reports = false;
        const SweepResult result = run_allreduce_sweep(*variant, quick, layout);
        REQUIRE(result.rows.size() == 1);
        CHECK(result.wrong_total() == 0);
        CHECK(result.rows[0].seconds > 0.0);
    }
}

}  // namespace

TEST_CASE("one GPU: via_gpu0 and nccl give the exact sum, the P2P variants say they need peers") {
    check_every_variant(1);
}

TEST_CASE("two GPUs: every variant gives the exact sum") { check_every_variant(2); }

TEST_CASE("two GPUs without peer access: via_gpu0, ring and nccl give the exact sum, p2p_kernel says why not") {
    if (visible_gpu_count() < 2) {
        MESSAGE("one GPU visible: no pair to leave without peer access");
        return;
    }
    check_every_variant(2, PeerAccess::leave_off);
}

TEST_CASE("all GPUs: every variant gives the exact sum") {
    const int gpus = std::min(visible_gpu_count(), kMaxRanks);
    if (gpus <= 2) {
        MESSAGE("all visible GPUs = " << gpus << ", already covered");
        return;
    }
    check_every_variant(gpus);
}

// doctest's main, after a check for GPUs: --min-gpus=N (ours) makes the run a skip (77) with fewer; a
// driver CUDA cannot use fails it (exit 3), and so do filters that select no test case, as in the other
// GPU tests (gpu_test_main.cpp).
int main(int argc, char** argv) {
    return fwi::run_program("test_allreduce_gpu", [&] {
        int min_gpus = 1;
        std::vector<char*> doctest_args;
        for (int i = 0; i < argc; ++i) {
            if (std::strncmp(argv[i], "--min-gpus=", 11) == 0)
                min_gpus = std::atoi(argv[i] + 11);
            else
                doctest_args.push_back(argv[i]);
        }
        const int gpus = visible_gpu_count_checked();
        if (gpus < min_gpus) {
            std::printf("skipped: needs %d GPU(s), found %d\n", min_gpus, gpus);
            return int(fwi::kExitSkipped);
        }
        doctest::Context context(static_cast<int>(doctest_args.size()), doctest_args.data());
        return fwi::run_selected_test_cases(context);
    });
}
