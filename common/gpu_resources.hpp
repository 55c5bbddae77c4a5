// Owners of what a program asks CUDA for: device memory (DeviceBuffer), page-locked host memory
// (PinnedBuffer), streams (CudaStream), events (CudaEvent) and graphs (CudaGraph, CudaGraphExec). They
// are the suite's one way to hold these: each is given back when its owner goes, on an error path too, and
// moves but never copies.
//
// A DeviceBuffer, CudaStream or CudaEvent is made on the device its constructor names (a DeviceBuffer given
// only a count: on the current one, as cudaMalloc does) and makes that device current, as cudaSetDevice
// would, because the code that makes a stream or a buffer usually goes on to use it there. It remembers its
// device and is given back there, the caller's current device restored after. A PinnedBuffer belongs to no
// device: with unified addressing (every 64-bit platform CUDA supports) every GPU's copies read it. A
// default-constructed one holds nothing: a container of them (resize, an array member) never makes streams
// on whichever device happens to be current.
//
// Once the process has abandoned its GPU work (abandon_gpu_work, errors.hpp: a wait gave up on work that
// may never end) they give back nothing: freeing memory or destroying a stream would wait on that work
// forever, and the process's end releases them anyway.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstddef>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "cuda_check.hpp"
#include "errors.hpp"

namespace fwi {

inline int current_device() {
    int device = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    return device;
}

namespace detail {

// A destructor cannot throw, so a failed give-back is said here, once a process, and its error cleared,
// which the next launch check would otherwise report as its own. Not while an exception unwinds: that
// error is what broke the GPU's context (a kernel's bad memory access, which stays: every later CUDA call
// fails with it), and its own message follows.
inline void give_back_failed(cudaError_t status) {
    static std::atomic<bool> said{false};
    if (std::uncaught_exceptions() == 0 && !said.exchange(true))
        print_warning(std::string("giving back a CUDA object failed: ") + cudaGetErrorString(status));
    cudaGetLastError();
}

constexpr int kNoDevice = -1;  // the device of page-locked host memory, which belongs to none

// One CUDA handle and its device (kNoDevice: none to make current), given back by `release` (cudaFree,
// cudaStreamDestroy, ...).
template <typename Handle, cudaError_t (*release)(Handle)>
class OwnedHandle {
public:
    OwnedHandle() = default;
    OwnedHandle(Handle handle, int device) : handle_(handle), device_(device) {}
    ~OwnedHandle() { reset(); }
    OwnedHandle(OwnedHandle&& other) noexcept
        : handle_(std::exchange(other.handle_, Handle{})), device_(other.device_) {}
    OwnedHandle& operator=(OwnedHandle&& other) noexcept {
        std::swap(handle_, other.handle_);
        std::swap(device_, other.device_);
        return *this;  // `other` gives back what this held, when it goes
    }
    OwnedHandle(const OwnedHandle&) = delete;
    OwnedHandle& operator=(const OwnedHandle&) = delete;

    Handle get() const { return handle_; }
    int device() const { return device_; }

private:
    void reset() noexcept {
        if (!handle_ || gpu_work_abandoned()) return;
        int current = device_;
        if (device_ != kNoDevice) cudaGetDevice(&current);
        if (current != device_) cudaSetDevice(device_);
        if (const cudaError_t status = release(handle_); status != cudaSuccess) give_back_failed(status);
        if (current != device_) cudaSetDevice(current);
        handle_ = Handle{};
    }

    Handle handle_{};
    int device_ = kNoDevice;
};

inline int make_current(int device) {
    CUDA_CHECK(cudaSetDevice(device));
    return device;
}

// `count` elements of T at memory that `release` gives back: what DeviceBuffer and PinnedBuffer share. The
// count moves with the memory: a moved-from array is empty, and one moved into gives its own back.
template <typename T, cudaError_t (*release)(void*)>
class OwnedArray {
public:
    OwnedArray() = default;
    OwnedArray(void* memory, size_t count, int device) : memory_(memory, device), count_(count) {}
    OwnedArray(OwnedArray&& other) noexcept
        : memory_(std::move(other.memory_)), count_(std::exchange(other.count_, 0)) {}
    OwnedArray& operator=(OwnedArray&& other) noexcept {
        std::swap(memory_, other.memory_);
        std::swap(count_, other.count_);
        return *this;
    }

    T* data() const { return static_cast<T*>(memory_.get()); }
    size_t size() const { return count_; }
    size_t bytes() const { return count_ * sizeof(T); }
    int device() const { return memory_.device(); }

private:
    OwnedHandle<void*, release> memory_;
    size_t count_ = 0;
};

}  // namespace detail

// `count` elements of T in device memory.
template <typename T>
class DeviceBuffer : public detail::OwnedArray<T, cudaFree> {
public:
    DeviceBuffer() = default;
    explicit DeviceBuffer(size_t count) : DeviceBuffer(current_device(), count) {}
    DeviceBuffer(int device, size_t count) : detail::OwnedArray<T, cudaFree>(allocate(device, count), count, device) {}

    using detail::OwnedArray<T, cudaFree>::data;
    // Enqueues copying `host` (at most size() elements) into the first elements on `stream` (nullptr: the
    // legacy default stream, which a non-blocking stream does not wait for). A vector's memory is pageable,
    // which CUDA copies into a staging buffer of its own before the call returns: `host` may go at once.
    // (Pinned memory, which the copy engines read directly, must be kept until the stream has done it.)
    void upload(const std::vector<T>& host, cudaStream_t stream) {
        CUDA_CHECK(cudaMemcpyAsync(data(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice, stream));
    }
    // The first `count` elements, once `stream` has done everything before. The copy into pageable memory waits
    // for that without a limit: where the work before may be long, wait for it with one first (finish_within).
    std::vector<T> download(size_t count, cudaStream_t stream) const {
        std::vector<T> host(count);
        CUDA_CHECK(cudaMemcpyAsync(host.data(), data(), count * sizeof(T), cudaMemcpyDeviceToHost, stream));
        CUDA_CHECK(cudaStreamSynchronize(stream));
        return host;
    }

private:
    static void* allocate(int device, size_t count) {
        detail::make_current(device);
        void* memory = nullptr;
        if (count) CUDA_CHECK(cudaMalloc(&memory, count * sizeof(T)));
        return memory;
    }
};

// `count` elements of T in page-locked host memory (cudaHostAlloc with `flags`): the copy engines read and
// write it directly, and with cudaHostAllocMapped kernels can too.
template <typename T>
class PinnedBuffer : private detail::OwnedArray<T, cudaFreeHost> {
public:
    PinnedBuffer() = default;
    explicit PinnedBuffer(size_t count, unsigned flags = cudaHostAllocDefault)
        : detail::OwnedArray<T, cudaFreeHost>(allocate(count, flags), count, detail::kNoDevice) {}
    using detail::OwnedArray<T, cudaFreeHost>::data;
    using detail::OwnedArray<T, cudaFreeHost>::size;
    using detail::OwnedArray<T, cudaFreeHost>::bytes;

private:
    static void* allocate(size_t count, unsigned flags) {
        void* memory = nullptr;
        if (count) CUDA_CHECK(cudaHostAlloc(&memory, count * sizeof(T), flags));
        return memory;
    }
};

// A stream. Non-blocking by default: it does not wait for the legacy default stream (work queued with no
// stream), nor that stream for it. The first argument is the device's index, the kind the second: a
// `CudaStream(cudaStreamNonBlocking)` would make a stream on device 1.
class CudaStream {
public:
    enum class Kind { non_blocking, blocking };
    CudaStream() = default;  // none yet
    explicit CudaStream(int device, Kind kind = Kind::non_blocking) {
        detail::make_current(device);
        cudaStream_t stream = nullptr;
        CUDA_CHECK(
            cudaStreamCreateWithFlags(&stream, kind == Kind::blocking ? cudaStreamDefault : cudaStreamNonBlocking));
        stream_ = Owned(stream, device);
    }

    cudaStream_t get() const { return stream_.get(); }
    int device() const { return stream_.device(); }

private:
    using Owned = detail::OwnedHandle<cudaStream_t, cudaStreamDestroy>;
    Owned stream_;
};

// An event on `device` (its index). Without timing by default, the cheaper kind for ordering streams;
// with timing, cudaEventElapsedTime works between two of them.
class CudaEvent {
public:
    enum class Timing { off, on };
    CudaEvent() = default;  // none yet
    explicit CudaEvent(int device, Timing timing = Timing::off) {
        detail::make_current(device);
        cudaEvent_t event = nullptr;
        CUDA_CHECK(cudaEventCreateWithFlags(&event, timing == Timing::on ? cudaEventDefault : cudaEventDisableTiming));
        event_ = Owned(event, device);
    }

    cudaEvent_t get() const { return event_.get(); }
    int device() const { return event_.device(); }

private:
    using Owned = detail::OwnedHandle<cudaEvent_t, cudaEventDestroy>;
    Owned event_;
};

// A graph that stream capture recorded: end_capture(stream) ends the capture that
// cudaStreamBeginCapture(stream, ...) began and takes the graph.
class CudaGraph {
public:
    static CudaGraph end_capture(cudaStream_t stream) {
        cudaGraph_t graph = nullptr;
        CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
        return CudaGraph(graph);
    }
    cudaGraph_t get() const { return graph_.get(); }

private:
    explicit CudaGraph(cudaGraph_t graph) : graph_(graph, current_device()) {}
    detail::OwnedHandle<cudaGraph_t, cudaGraphDestroy> graph_;
};

// A graph made ready to launch (cudaGraphInstantiate) on the current device; it no longer needs the
// CudaGraph it was made from.
class CudaGraphExec {
public:
    CudaGraphExec() = default;  // none yet
    explicit CudaGraphExec(const CudaGraph& graph) {
        cudaGraphExec_t exec = nullptr;
        CUDA_CHECK(cudaGraphInstantiate(&exec, graph.get(), 0));
        exec_ = Owned(exec, current_device());
    }
    cudaGraphExec_t get() const { return exec_.get(); }

private:
    using Owned = detail::OwnedHandle<cudaGraphExec_t, cudaGraphExecDestroy>;
    Owned exec_;
};

}  // namespace fwi
