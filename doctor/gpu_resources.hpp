// GPU memory, streams and events for doctor's checks, and the one way doctor waits on a GPU: poll an
// event until it completes or the check's deadline passes. Work that passes the deadline may never end
// (a peer read over a broken link, a kernel waiting for a flag): it cannot be cancelled, and freeing
// memory or destroying a stream would wait on it. So a timed-out wait marks the GPU work abandoned
// (abandon_gpu_work, common/errors.hpp) and throws DeviceHang; from then on these destructors free
// nothing, and doctor ends the process.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <string>

#include "watchdog.hpp"

namespace fwi::doctor {

// Polls `event` until it completes; after the deadline marks GPU work abandoned and throws DeviceHang
// naming `what`. A CUDA error (a kernel that faulted) throws EnvironmentError.
void wait_for_event(cudaEvent_t event, const Deadline& deadline, const std::string& what);

class GpuBuffer {
public:
    GpuBuffer(int device, size_t bytes);
    ~GpuBuffer();
    GpuBuffer(GpuBuffer&& other) noexcept;
    GpuBuffer(const GpuBuffer&) = delete;
    GpuBuffer& operator=(const GpuBuffer&) = delete;
    GpuBuffer& operator=(GpuBuffer&&) = delete;

    template <typename T>
    T* as() const {
        return static_cast<T*>(data_);
    }
    void* get() const { return data_; }

private:
    int device_;
    void* data_ = nullptr;
};

class GpuStream {
public:
    explicit GpuStream(int device);
    ~GpuStream();
    GpuStream(GpuStream&& other) noexcept;
    GpuStream(const GpuStream&) = delete;
    GpuStream& operator=(const GpuStream&) = delete;
    GpuStream& operator=(GpuStream&&) = delete;

    cudaStream_t get() const { return stream_; }
    // Records an event on the stream and waits for it (wait_for_event).
    void finish(const Deadline& deadline, const std::string& what) const;

private:
    int device_;
    cudaStream_t stream_ = nullptr;
};

class GpuEvent {
public:
    explicit GpuEvent(int device);  // with timing
    ~GpuEvent();
    GpuEvent(GpuEvent&& other) noexcept;
    GpuEvent(const GpuEvent&) = delete;
    GpuEvent& operator=(const GpuEvent&) = delete;
    GpuEvent& operator=(GpuEvent&&) = delete;

    cudaEvent_t get() const { return event_; }

private:
    int device_;
    cudaEvent_t event_ = nullptr;
};

}  // namespace fwi::doctor
