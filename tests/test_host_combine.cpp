// The host-side combine across MPI ranks, run under mpirun with 1 to 4 ranks (CTest label mpi, on the
// CPU): rank r contributes r + 0.001 i, so the sum is W (W-1)/2 + 0.001 i W, for chunk sizes that do and
// do not divide the buffer.
#include <doctest/doctest.h>
#include <mpi.h>

#include <cmath>
#include <cstring>

#include "host_combine.hpp"
#include "mpi_env.hpp"

using namespace fwi;

namespace {
std::vector<float> contribution(size_t count) {
    std::vector<float> values(count);
    for (size_t i = 0; i < count; ++i) values[i] = float(world_rank()) + 0.001f * float(i);
    return values;
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
    const double w = world_size();
    for (size_t chunk : {size_t(0), size_t(777), size_t(259), size_t(100), size_t(333)}) {  // 259: 3 whole chunks
        CAPTURE(chunk);
        std::vector<float> values = contribution(777);
        for (const Chunk& c : chunk_ranges(values.size(), chunk))
            sum_chunk_over_ranks(values.data(), c, MPI_COMM_WORLD);
        for (size_t i = 0; i < values.size(); ++i)
            REQUIRE(values[i] == doctest::Approx(w * (w - 1.0) / 2.0 + 0.001 * double(i) * w).epsilon(1e-6));
        // Bit-identical on every rank: compare with rank 0's copy.
        std::vector<float> rank0 = values;
        MPI_Bcast(rank0.data(), int(rank0.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
        CHECK(std::memcmp(rank0.data(), values.data(), values.size() * sizeof(float)) == 0);
    }
}
