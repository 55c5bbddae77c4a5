#include "host_memory.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "errors.hpp"
#include "stencil.hpp"

namespace fwi {

namespace {

// One step of the CPU reference's history: the wavefield on the stored grid and the absorbing layer's
// variables (ForwardHistory).
size_t history_floats_per_step(const Problem& p) {
    const FieldLayout l = FieldLayout::make(p.nz, p.nx, p.absorb_width);
    return l.cells + l.x_band_cells() + l.z_band_cells();
}

std::string in_gib(size_t bytes) {
    char text[32];
    std::snprintf(text, sizeof text, "%.1f GiB", gib(bytes));
    return text;
}

}  // namespace

// The terms, each held whole at one moment of the run:
//   traces   every FWI program builds the observed traces of every shot in one array [nshots][nt][nrec]
//            (GpuShare, through GpuPropagator::observed_traces_of: on every rank, for every GPU of 04), and
//            01 models them again for observed_gathers.npy; 01 --verify models them on the CPU
//            (CpuPropagator::model_all_shots).
//   history  01 --verify's CPU gradient keeps the wavefield and the layer's variables of every step of the
//            shot it works on (ForwardHistory), while it holds the observed traces.
// One copy of the observed traces per GPU thread or rank is counted, although the modelled traces often
// sit beside them.
HostMemoryNeed host_memory_needed(const Problem& p, int trace_copies, bool with_cpu_reference) {
    HostMemoryNeed need;
    need.traces = sizeof(float) * size_t(std::max(1, trace_copies)) * size_t(p.nshots) * p.trace_samples();
    if (with_cpu_reference) need.history = sizeof(float) * size_t(p.nt) * history_floats_per_step(p);
    return need;
}

// Physical memory, not MemAvailable (/proc/meminfo): what is free changes from one moment to the next and
// between the ranks of one launch, and a run that needs more than is free now may still fit once the
// kernel reclaims its caches; no run fits in more than the machine has, so the check refuses only what
// certainly fails, and gives the same answer every time. (A container's memory limit may be lower; a
// run above it still ends at that limit.)
size_t physical_memory_bytes() {
    const long pages = ::sysconf(_SC_PHYS_PAGES), page_size = ::sysconf(_SC_PAGE_SIZE);
    return pages > 0 && page_size > 0 ? size_t(pages) * size_t(page_size) : 0;
}

void require_host_memory(const Problem& p, int trace_copies, bool with_cpu_reference) {
    const HostMemoryNeed need = host_memory_needed(p, trace_copies, with_cpu_reference);
    const size_t available = physical_memory_bytes();
    if (available == 0 || need.total() <= available) return;
    const bool copies = trace_copies > 1;
    std::string message =
        "host memory: the run needs at least " + in_gib(need.total()) + " and this machine has " + in_gib(available) +
        ": the observed traces of every shot, --nshots x --nt x --nrec = " + std::to_string(p.nshots) + " x " +
        std::to_string(p.nt) + " x " + std::to_string(p.nrec) + " floats" +
        (copies ? ", once for each of the " + std::to_string(trace_copies) + " GPU threads or ranks on this machine"
                : std::string()) +
        " (" + in_gib(need.traces) + ")";
    if (with_cpu_reference)
        message +=
            ", and the CPU reference's wavefields of one shot at every step, --nt x the --nz x --nx grid with its "
            "absorbing layer = " +
            std::to_string(p.nt) + " x " + std::to_string(history_floats_per_step(p)) + " floats (" +
            in_gib(need.history) + ")";
    message += "; use fewer shots (--nshots), time steps (--nt) or receivers (--nrec)";
    if (with_cpu_reference) message += ", or a smaller grid (--nz, --nx)";
    if (copies) message += ", or fewer GPUs or ranks on this machine";
    throw EnvironmentError(message);
}

}  // namespace fwi
