// The one way doctor waits on a GPU: poll an event until it completes or the check's deadline passes.
// Work that passes the deadline may never end (a peer read over a broken link, a kernel waiting for a
// flag): it cannot be cancelled, and freeing memory or destroying a stream would wait on it. So a
// timed-out wait marks the GPU work abandoned (abandon_gpu_work, common/errors.hpp) and throws DeviceHang;
// from then on the owners of memory, streams and events (common/gpu_resources.hpp) free nothing, and
// doctor ends the process.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "gpu_resources.hpp"
#include "watchdog.hpp"

namespace fwi::doctor {

// Polls `event` until it completes; after the deadline marks GPU work abandoned and throws DeviceHang
// naming `what`. A CUDA error (a kernel that faulted) throws EnvironmentError.
void wait_for_event(cudaEvent_t event, const Deadline& deadline, const std::string& what);

// Records an event on `stream` and waits for it (wait_for_event).
void finish(const CudaStream& stream, const Deadline& deadline, const std::string& what);

}  // namespace fwi::doctor
