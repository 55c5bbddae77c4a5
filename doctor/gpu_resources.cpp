#include "gpu_resources.hpp"

#include <utility>

#include "cuda_check.hpp"
#include "device.hpp"
#include "errors.hpp"

namespace fwi::doctor {

void wait_for_event(cudaEvent_t event, const Deadline& deadline, const std::string& what) {
    if (wait_for_event_within(event, deadline.remaining())) return;
    abandon_gpu_work();
    throw DeviceHang(what, deadline.seconds());
}

GpuBuffer::GpuBuffer(int device, size_t bytes) : device_(device) {
    CUDA_CHECK(cudaSetDevice(device));
    CUDA_CHECK(cudaMalloc(&data_, bytes));
}

GpuBuffer::GpuBuffer(GpuBuffer&& other) noexcept : device_(other.device_), data_(std::exchange(other.data_, nullptr)) {}

GpuBuffer::~GpuBuffer() {
    if (!data_ || gpu_work_abandoned()) return;
    cudaSetDevice(device_);
    cudaFree(data_);
}

GpuStream::GpuStream(int device) : device_(device) {
    CUDA_CHECK(cudaSetDevice(device));
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
}

GpuStream::GpuStream(GpuStream&& other) noexcept
    : device_(other.device_), stream_(std::exchange(other.stream_, nullptr)) {}

GpuStream::~GpuStream() {
    if (!stream_ || gpu_work_abandoned()) return;
    cudaSetDevice(device_);
    cudaStreamDestroy(stream_);
}

void GpuStream::finish(const Deadline& deadline, const std::string& what) const {
    GpuEvent done(device_);
    CUDA_CHECK(cudaEventRecord(done.get(), stream_));
    wait_for_event(done.get(), deadline, what);
}

GpuEvent::GpuEvent(int device) : device_(device) {
    CUDA_CHECK(cudaSetDevice(device));
    CUDA_CHECK(cudaEventCreate(&event_));
}

GpuEvent::GpuEvent(GpuEvent&& other) noexcept : device_(other.device_), event_(std::exchange(other.event_, nullptr)) {}

GpuEvent::~GpuEvent() {
    if (!event_ || gpu_work_abandoned()) return;
    cudaSetDevice(device_);
    cudaEventDestroy(event_);
}

}  // namespace fwi::doctor
