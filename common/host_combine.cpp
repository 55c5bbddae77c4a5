#include "host_combine.hpp"

#include <algorithm>
#include <climits>

#include "mpi_check.hpp"

namespace fwi {

std::vector<Chunk> chunk_ranges(size_t total, size_t chunk_elements) {
    if (chunk_elements == 0) chunk_elements = std::max<size_t>(total, 1);
    std::vector<Chunk> chunks;
    for (size_t offset = 0; offset < total; offset += chunk_elements)
        chunks.push_back({offset, std::min(chunk_elements, total - offset)});
    return chunks;
}

void sum_chunk_over_ranks(float* values, const Chunk& chunk, MPI_Comm comm) {
    // MPI counts are int: split a chunk larger than INT_MAX elements into several calls.
    for (size_t done = 0; done < chunk.count;) {
        const int count = static_cast<int>(std::min<size_t>(chunk.count - done, INT_MAX));
        MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, values + chunk.offset + done, count, MPI_FLOAT, MPI_SUM, comm));
        done += count;
    }
}

}  // namespace fwi
