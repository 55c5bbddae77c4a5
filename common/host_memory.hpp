// Host memory a run needs, checked before any GPU work. A problem can pass every range check and still be
// far too large for the machine (--nshots 16384 --nt 100000 --nrec 16384 is 100000 GiB of traces); it
// would end in std::bad_alloc or the OOM killer, after the GPU work had begun.
#pragma once

#include <cstddef>

#include "problem.hpp"

namespace fwi {

// What a run certainly holds in host memory at once on one machine, by the arrays that grow with the flags
// (host_memory.cpp says where each is allocated). A lower bound: the models and every smaller array are
// left out. `trace_copies` is how many copies of the observed traces the machine holds: one for each GPU
// of 04 (one thread each), one for each rank of an MPI program on this node.
struct HostMemoryNeed {
    size_t traces = 0;   // the observed traces of every shot: nshots x nt x nrec floats, per copy
    size_t history = 0;  // with the CPU reference: one shot's wavefields and layer variables at every step
    size_t total() const { return traces + history; }
};
HostMemoryNeed host_memory_needed(const Problem& problem, int trace_copies, bool with_cpu_reference);

// This machine's physical memory in bytes; 0 when the system does not say.
size_t physical_memory_bytes();

// Throws EnvironmentError (exit 3, as for device memory: the machine is too small, not the input wrong),
// naming the flags that size the need and the GiB needed and available, when host_memory_needed is more
// than physical_memory_bytes. Call it after validate(), before any GPU work; with_cpu_reference for 01
// --verify.
void require_host_memory(const Problem& problem, int trace_copies, bool with_cpu_reference = false);

}  // namespace fwi
