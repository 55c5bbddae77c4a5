// Summing a buffer over MPI ranks in place, a chunk at a time: 03's host-staged combines pass host
// memory (the portable pattern that works with any MPI; chunks let a pipelined caller overlap the copies
// of one chunk with the sum of another), its cuda_aware combine device memory. A sum, not an average:
// the sum of the ranks' gradients is the gradient over all shots.
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

// Sums `chunk` of `values` over the ranks of `comm` in place (MPI_Allreduce, MPI_IN_PLACE). Every rank
// gets bit-identical results.
void sum_chunk_over_ranks(float* values, const Chunk& chunk, MPI_Comm comm);

}  // namespace fwi
