// Device helpers: finding GPUs, what code of this build they run, and the copy-bandwidth ceiling.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "cuda_check.hpp"
#include "gpu_resources.hpp"
#include "nvml.hpp"

namespace fwi {

// Blocks for a grid-stride loop over `count` items, `per_block` items a block in one pass (its threads,
// or its threads times the items each takes): enough for one pass where that takes at most `max_blocks`
// blocks, else `max_blocks`, enough to fill a GPU, each thread then looping. At least one, so an empty
// loop is still a valid launch.
inline unsigned grid_stride_blocks(size_t count, int per_block, unsigned max_blocks) {
    return static_cast<unsigned>(std::clamp<size_t>((count + per_block - 1) / per_block, 1, max_blocks));
}

// Polls `event` (the suite's one way to wait with a deadline, poll_until_done) until it has completed:
// true, or false once `timeout_s` has passed first. For its first 0.2 s it polls without pause (yielding the
// core to any other thread), as CUDA's own waits spin by default, so that a short wait ends as soon as
// theirs would; then it sleeps 0.1 ms between polls. Time the process was stopped (in a debugger, by Ctrl-Z)
// does not count against the limit. A CUDA error throws, as CUDA_CHECK does.
bool wait_for_event_within(cudaEvent_t event, double timeout_s);

// Waits until the GPU has done all the work queued on `stream` so far, for at most `timeout_s`: how the
// suite waits on its own kernels (an event recorded on the stream, wait_for_event_within). Past the limit
// the work may never end (a GPU that hangs), and freeing memory would wait on it: abandons it
// (abandon_gpu_work, errors.hpp) and throws EnvironmentError naming `what`, the GPU and the limit.
void finish_within(const CudaStream& stream, double timeout_s, const std::string& what);

// The limit finish_within gets for work of `cell_updates` updates of a cell by a time step (cells x steps x
// shots, each pass counted): a minute plus the work at 1e8 updates a second, a rate far below any GPU the
// suite runs on (an H200 makes about 2e11 in the gradient), so that only a GPU that hangs reaches it; 20 times
// that under compute-sanitizer, which slows GPU work many times over. (The tests of a GPU that hangs shorten
// the minute: gpu_work_base_seconds, errors.hpp.)
double gpu_work_limit_seconds(double cell_updates);

// Number of visible CUDA GPUs; 0 when there are none or the driver cannot be reached.
int visible_gpu_count();
// The same for deciding whether GPU tests run: 0 only where there is no GPU (or no NVIDIA driver at all).
// Where a driver is installed but CUDA cannot use it (a driver older than the runtime, a kernel module
// that does not match its library), throws EnvironmentError saying so: a count of 0 there would skip
// every GPU test unseen.
int visible_gpu_count_checked();

// Throws EnvironmentError (exit 3) with one clear line when fewer than `needed` GPUs are visible.
void require_gpus(int needed);

// Warns on stderr, in one line, of the processes other than this one and `job_processes` (the other ranks
// of its job on this node) that hold a context on GPUs `first` to `first + count - 1` (CUDA's numbers, as
// CUDA_VISIBLE_DEVICES counts), where NVML can list them (not in most containers, nor for MIG instances):
// what this run times beside a process that computes is slower and varies (a shared node, a class, a job
// left running). `where` begins the line ("on host node-a, "). Call it before this process touches those
// GPUs: where the driver lists processes under pids of another namespace, this one would read as another
// (so a GPU already checked in this process is not checked again).
void warn_of_other_processes(int first, int count, const std::vector<unsigned>& job_processes = {},
                             const std::string& where = "");

// "NVIDIA H100 80GB HBM3 (sm_90, 132 SMs, 79.1 GiB)"
std::string describe_device(int device);

// The GPU's PCI address, as NVML (nvml.hpp) finds it. Asks no context of the GPU.
PciAddress gpu_pci_address(int device);

// Whether GPU `device` is in exclusive-process compute mode (common on clusters): one process at a time may
// hold a context on it, and the next one's first CUDA call fails with cudaErrorDevicesUnavailable. Asks no
// context of the GPU.
bool gpu_takes_one_process(int device);

// Whether every pair of GPUs 0..count-1 may have peer access, both ways (cudaDeviceCanAccessPeer: PCIe
// cards without P2P, or GPUs under different CPU sockets, may not). Asks no context of the GPUs.
bool every_pair_has_peer_access(int count);

// All of GPU `device`'s memory in bytes, not only what is free now.
size_t device_memory_bytes(int device);

// Which of this build's code a GPU runs, asked of a kernel of this library (every kernel of the suite is
// built for the same architectures, CMAKE_CUDA_ARCHITECTURES). A GPU runs machine code built for its own
// architecture, or for an older one of the same major version; else PTX of an older or equal architecture,
// which the driver compiles when the program loads; else nothing.
struct BuildCode {
    bool runs = false;       // false: the build has no code this GPU can run
    int ptx_version = 0;     // the architecture the code was compiled for: 80 for compute_80 or sm_80
    int binary_version = 0;  // the architecture of the machine code the GPU runs: 90 on an H100
    std::string load_error;  // why it cannot run: "cudaErrorNoKernelImageForDevice", ...
};
BuildCode build_code_for(int device);

// Whether kernels of this code can wait for the kernels before them (griddepcontrol, compiled only for
// compute capability 9.0 and later), which programmatic dependent launch needs.
inline bool has_programmatic_wait(const BuildCode& code) { return code.runs && code.ptx_version >= 90; }
// Whether the driver can make a graph's edges programmatic: edges with data came with CUDA 12.3, and a
// program built with a newer toolkit still runs on an older driver of the same major version (CUDA's
// minor version compatibility), where those calls fail.
bool driver_makes_programmatic_edges();
// Turns every edge of `graph` from one kernel node to another into a programmatic edge: the later kernel
// may be launched before the earlier one ends, and must wait for it itself (griddepcontrol.wait; the
// propagator's wait_for_previous_step). Edges to or from other kinds of node stay as they are. Needs
// driver_makes_programmatic_edges() and kernels built with the wait (has_programmatic_wait).
void make_kernel_edges_programmatic(cudaGraph_t graph);

// Device-to-device copy bandwidth of the current device, counting bytes read plus bytes written, from
// the median of several cudaMemcpyAsync of `bytes` after a warm-up. The roofline's ceiling.
double measure_copy_bandwidth(size_t bytes);

}  // namespace fwi
