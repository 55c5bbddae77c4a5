// The data of the P2P check: every GPU fills its buffer with a pattern that names the GPU and the word's
// position, so a peer transfer that returns zeros, stale data, another GPU's data or nothing at all is
// told apart from a correct one. Shared by the device code and the host-side check.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#if defined(__CUDACC__)
#define DOCTOR_HD __host__ __device__ __forceinline__
#else
#define DOCTOR_HD inline
#endif

namespace fwi::doctor {

// Destination buffers are filled with this byte before a transfer: the word it makes is even, and
// pattern words are odd, so an untouched word never passes for data.
constexpr unsigned char kPoisonByte = 0xFE;
constexpr uint32_t kPoisonWord = 0xFEFEFEFEu;

// Odd, hence never zero and never the poison.
DOCTOR_HD uint32_t pattern_word(int source_gpu, size_t index) {
    return ((static_cast<uint32_t>(index) * 2654435761u) ^ (0x5bd1e995u * static_cast<uint32_t>(source_gpu + 1))) | 1u;
}

struct PatternCheck {
    size_t words = 0;
    size_t wrong = 0;      // words that differ from the source GPU's pattern
    size_t zeros = 0;      // of those, words that read as zero
    size_t untouched = 0;  // of those, words still holding the poison (never written)
    size_t first_wrong = 0;
    bool ok() const { return wrong == 0; }
};

PatternCheck check_pattern(const uint32_t* data, size_t words, int source_gpu);

// "ok", "all 1048576 words are zero", "524288 of 1048576 words wrong (524288 zero), first at word 524288"
std::string describe(const PatternCheck& check);

}  // namespace fwi::doctor
