// CUDA_CHECK(call): throws fwi::EnvironmentError naming the call, file, line and CUDA's error string, and
// for the errors cuda_error_hint knows, what to do (DeviceMemoryError for a GPU out of memory).
// CUDA_CHECK_LAUNCH(): the same for the last kernel launch.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "errors.hpp"
#include "run_env.hpp"  // build_cuda_architectures

namespace fwi {

// How to build the suite again for the GPUs present: a fresh configure without CUDAARCHS, so that
// CMakeLists.txt chooses the architectures from the GPUs it sees; or, for a build folder that nodes with
// different GPUs share (a cluster's login and compute nodes), every kind named at once.
constexpr const char* kRebuildForTheseGpus =
    "build again for the GPUs present: `env -u CUDAARCHS cmake --preset default --fresh && cmake --build --preset "
    "default`; where nodes with other GPUs share the build folder, name every kind instead, e.g. "
    "`CUDAARCHS=\"80;90\" cmake --preset default --fresh` (nvidia-smi --query-gpu=compute_cap shows a node's)";

// What to do where the NVIDIA driver supports an older CUDA than the runtime this program was built with
// (`driver` and `runtime` as cudaDriverGetVersion and cudaRuntimeGetVersion give them: 12020). Building with
// an older toolkit is advised only down to the suite's floor, CUDA 12.4 (CMakeLists.txt): a CUDA 12 driver
// older than that still runs a 12.4 build (CUDA's minor-version compatibility).
inline std::string older_driver_advice(int driver, int runtime) {
    constexpr int kOldestToolkit = 12040;
    std::string advice = "update the NVIDIA driver (CUDA 13 needs driver 580 or newer, CUDA 12 525 or newer)";
    if (driver >= kOldestToolkit)
        advice += ", or build with a CUDA toolkit no newer than " + cuda_version_text(driver);
    else if (driver / 1000 == 12 && runtime / 1000 > 12)
        advice += ", or build with a CUDA 12 toolkit (12.4 or newer), which any CUDA 12 driver runs";
    return advice;
}

// " (compute capability 9.0)" for the current GPU; "" where CUDA cannot say.
inline std::string current_gpu_compute_capability() {
    int device = 0, major = 0, minor = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
        cudaGetLastError();
        return "";
    }
    return " (compute capability " + std::to_string(major) + "." + std::to_string(minor) + ")";
}

// What to do about a GPU out of memory, one held by another process in exclusive-process mode, too many peers, a driver
// older than the build, and the errors of a build made for other GPUs than this one (`gpu`: what
// current_gpu_compute_capability says); "" for every other error.
inline std::string cuda_error_hint(cudaError_t status, const std::string& gpu = "") {
    if (status == cudaErrorMemoryAllocation)
        return "the GPU's free memory is taken: by other processes, or other ranks on this GPU (nvidia-smi lists "
               "them), or by this run, which is then too large for it";
    if (status == cudaErrorNoKernelImageForDevice)
        return "this build (CUDA architectures " + build_cuda_architectures() + ") has no code for this GPU" + gpu +
               "; " + kRebuildForTheseGpus;
    if (status == cudaErrorDevicesUnavailable)
        return "the GPU takes one process at a time (its compute mode is exclusive-process, common on clusters; "
               "nvidia-smi -q shows it) and another process holds it, or it is in prohibited mode: wait for that "
               "process (nvidia-smi lists it), or choose another GPU with CUDA_VISIBLE_DEVICES; in this mode two "
               "ranks cannot share a GPU";
    if (status == cudaErrorTooManyPeers)
        return "a GPU can have peer access to only so many others at once (8 on a machine without NVSwitch): on a "
               "machine with more GPUs, give CUDA_VISIBLE_DEVICES at most 9 of them";
    if (status == cudaErrorUnsupportedPtxVersion)
        return std::string(
                   "this build has only PTX for this GPU, from a CUDA toolkit newer than the driver, which cannot "
                   "compile it; update the driver, or ") +
               kRebuildForTheseGpus;
    if (status == cudaErrorCallRequiresNewerDriver)  // (no CUDA call here: CPU-only tests link this without cudart)
        return "the NVIDIA driver is older than the CUDA toolkit this program was built with, and lacks this call; "
               "update the driver, or build with a toolkit no newer than the driver (nvidia-smi shows the CUDA "
               "version it supports; 12.4 at the oldest, which any CUDA 12 driver runs)";
    return "";
}

[[noreturn]] inline void throw_cuda_error(cudaError_t status, const char* call, const char* file, int line) {
    const std::string hint =
        cuda_error_hint(status, status == cudaErrorNoKernelImageForDevice ? current_gpu_compute_capability() : "");
    const std::string message = std::string("CUDA call `") + call + "` failed at " + source_line_text(file, line) +
                                ": " + cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")" +
                                (hint.empty() ? "" : ": " + hint);
    if (status == cudaErrorMemoryAllocation) {
        cudaGetLastError();  // not sticky: clear it, or the next launch check would report it again
        throw DeviceMemoryError(message);
    }
    throw EnvironmentError(message);
}

}  // namespace fwi

#define CUDA_CHECK(call)                                                                                               \
    do {                                                                                                               \
        const cudaError_t cuda_check_status_ = (call);                                                                 \
        if (cuda_check_status_ != cudaSuccess) ::fwi::throw_cuda_error(cuda_check_status_, #call, __FILE__, __LINE__); \
    } while (0)

#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())
