// FNV-1a, 64 bit: a fast hash that tells different or damaged bytes apart (not a defence against anyone
// who means harm). The checkpoint files' checksum (checkpoint.cpp) and the check that every MPI rank was
// given the same command line (mpi_env.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

namespace fwi {

constexpr std::uint64_t kFnv1aStart = 14695981039346656037ull;

// The hash of `size` bytes at `data`, or, given the hash of earlier bytes as `hash`, of all of them.
inline std::uint64_t fnv1a(const void* data, std::size_t size, std::uint64_t hash = kFnv1aStart) {
    const unsigned char* bytes = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < size; ++i) hash = (hash ^ bytes[i]) * 1099511628211ull;
    return hash;
}

}  // namespace fwi
