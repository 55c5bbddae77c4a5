// Other processes on the GPUs. A process that holds a context on a GPU shares it with whatever else runs
// there, so every time measured beside it is slower and varies. doctor's check 1 warns of them, and
// scripts/compare.sh (through visible_gpus --other-processes) before its first run and after its last.
// The lists come from NVML (nvml.hpp), as `nvidia-smi` shows them.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "nvml.hpp"

namespace fwi {

// A process that is not one of the caller's own, with a context on a visible GPU.
struct OtherProcess {
    int gpu = 0;                // CUDA's ordinal (CUDA_VISIBLE_DEVICES counts)
    unsigned pid = 0;           // in the driver's view
    long long used_bytes = -1;  // its GPU memory; -1 where NVML does not say
    std::string name;           // from /proc/PID/comm; "" where this machine cannot see the process
};

// Processes the driver lists on a GPU but cannot be named: see OtherProcesses::unnamed.
struct UnnamedProcesses {
    int gpu = 0;
    int count = 0;
};

struct OtherProcesses {
    std::vector<OtherProcess> named;  // each (GPU, process) pair
    // GPUs whose list lacks every one of the caller's processes although the caller holds a context there:
    // the driver's process ids are then another PID namespace's (a container's), one of the listed processes
    // is the caller and the rest cannot be named.
    std::vector<UnnamedProcesses> unnamed;
    // GPUs whose list is empty although the caller holds a context there: the driver hides processes from
    // this one (a container), so others may be hidden too.
    std::vector<int> hidden;
    std::string unknown;  // why some GPU's list could not be read; "" when every list was

    // Processes counted once however many GPUs they use; the unnamed ones GPU by GPU.
    int process_count() const;
    int gpu_count() const;  // the GPUs with another process on them
};

// Splits each visible GPU's list (per CUDA ordinal) into the caller's processes (`own`) and the others.
// `own_context`: the caller holds a context on every one of these GPUs and is the only one of `own` that
// does (doctor's check 1, whose other ranks touch no GPU before it; and each rank's look at its own GPU in
// check 7, one rank per GPU where the check passes), so it must be in every list (see
// OtherProcesses::unnamed and hidden). `name_of` names a pid ("" when it cannot).
OtherProcesses split_gpu_processes(const std::vector<std::vector<GpuProcess>>& per_gpu,
                                   const std::vector<unsigned>& own, bool own_context,
                                   const std::function<std::string(unsigned)>& name_of);

// NVML's lists for the GPUs at `gpus` (in CUDA's order), split as above, the pids named from /proc. A GPU
// whose list NVML cannot give counts as having none, and `unknown` says why. Nor is a GPU in MIG mode listed
// (`unknown` says so; nothing at all where CUDA_VISIBLE_DEVICES names MIG instances): NVML's list is then the
// whole GPU's, with the processes of instances that do not share this one's SMs or memory, however the
// instance was handed over (CUDA_VISIBLE_DEVICES, a container runtime, a job's GPU request).
OtherProcesses find_other_processes(const Nvml& nvml, const std::vector<PciAddress>& gpus,
                                    const std::vector<unsigned>& own, bool own_context);

// A line for each other process on each GPU, "GPU 0: pid 4242 (python3, 20.0 GiB)", for each GPU's
// unnamed ones, "GPU 1: 2 other processes, not named (...)", and for each GPU that hides them.
std::vector<std::string> other_process_lines(const OtherProcesses& found);

}  // namespace fwi
