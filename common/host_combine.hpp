// Combining a gradient across MPI ranks through host memory: the portable pattern that works with any
// MPI. The buffer is split into chunks (so a pipelined caller can overlap the copies of one chunk with
// the reduction of another); each chunk is summed across ranks in place, and averaged if asked.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <vector>

namespace fwi {

struct Chunk {
    size_t offset = 0, count = 0;
};

// [0, total) in chunks of `chunk_elements` (the last one shorter); one chunk when chunk_elements is 0.
std::vector<Chunk> chunk_ranges(size_t total, size_t chunk_elements);

enum class Combine { sum, average };

// Sums `chunk` of `values` over the ranks of `comm` in place (MPI_Allreduce, MPI_IN_PLACE); with
// Combine::average, divides by the number of ranks. Every rank gets bit-identical results.
void combine_chunk_on_host(float* values, const Chunk& chunk, Combine how, MPI_Comm comm);

// The whole buffer, chunk by chunk.
void combine_on_host(float* values, size_t count, size_t chunk_elements, Combine how, MPI_Comm comm);

}  // namespace fwi
