// The owners of CUDA objects (common/gpu_resources.hpp): what they hold, how they move, and on which
// device they are made and given back.
#include <doctest/doctest.h>

#include <utility>
#include <vector>

#include "cuda_check.hpp"
#include "cuda_timing.hpp"
#include "gpu_resources.hpp"

using namespace fwi;

TEST_CASE("an owner holds nothing until made, and a move leaves its source empty") {
    CHECK(DeviceBuffer<float>().data() == nullptr);
    CHECK(DeviceBuffer<float>(0).data() == nullptr);
    CHECK(CudaStream().get() == nullptr);
    CHECK(CudaEvent().get() == nullptr);

    DeviceBuffer<float> buffer(1000);
    float* const memory = buffer.data();
    REQUIRE(memory != nullptr);
    CHECK(buffer.bytes() == 4000);
    DeviceBuffer<float> moved(std::move(buffer));
    CHECK(moved.data() == memory);
    CHECK(moved.size() == 1000);
    CHECK(buffer.data() == nullptr);
    CHECK(buffer.size() == 0);
    DeviceBuffer<float> other(10);
    other = std::move(moved);  // the two swap: each count stays with its memory
    CHECK(other.data() == memory);
    CHECK(other.size() == 1000);
    CHECK(moved.size() == 10);
    moved = std::move(other);

    CudaStream stream(current_device());
    const cudaStream_t handle = stream.get();
    REQUIRE(handle != nullptr);
    std::vector<CudaStream> streams;
    streams.push_back(std::move(stream));
    CHECK(stream.get() == nullptr);
    CHECK(streams.front().get() == handle);

    // Usable after the moves: a copy there and back on the moved stream.
    const std::vector<float> values{1.0f, 2.0f, 3.0f};
    moved.upload(values, streams.front().get());
    CHECK(moved.download(values.size(), streams.front().get()) == values);
}

TEST_CASE("pinned memory is host memory the GPU copies into") {
    PinnedBuffer<int> pinned(4);
    REQUIRE(pinned.data() != nullptr);
    DeviceBuffer<int> device(4);
    CUDA_CHECK(cudaMemset(device.data(), 0, device.bytes()));
    pinned.data()[3] = 7;
    CUDA_CHECK(cudaMemcpy(pinned.data(), device.data(), device.bytes(), cudaMemcpyDeviceToHost));
    CHECK(pinned.data()[3] == 0);
}

TEST_CASE("an event timer measures the time between its two events") {
    CudaEventTimer timer;
    DeviceBuffer<char> source(size_t(64) << 20), destination(size_t(64) << 20);
    timer.start();
    CUDA_CHECK(cudaMemcpyAsync(destination.data(), source.data(), source.bytes(), cudaMemcpyDeviceToDevice));
    timer.stop();
    CHECK(timer.seconds() > 0.0);
}

TEST_SUITE("two_gpus") {
    TEST_CASE("an owner is made on the device it names and given back there, the current device restored") {
        CUDA_CHECK(cudaSetDevice(0));
        {
            const DeviceBuffer<float> buffer(1, 16);
            const CudaEvent event(1);
            CHECK(buffer.device() == 1);
            CHECK(event.device() == 1);
            CHECK(current_device() == 1);  // made current, as cudaSetDevice would
            cudaPointerAttributes where{};
            CUDA_CHECK(cudaPointerGetAttributes(&where, buffer.data()));
            CHECK(where.device == 1);
            CUDA_CHECK(cudaSetDevice(0));
        }
        CHECK(current_device() == 0);  // the destructors went to GPU 1 and came back
        CHECK(cudaGetLastError() == cudaSuccess);
        {
            const PinnedBuffer<float> pinned(16);  // made with GPU 0 current, belongs to none
            CUDA_CHECK(cudaSetDevice(1));
        }
        CHECK(current_device() == 1);  // given back without a device made current
        CUDA_CHECK(cudaSetDevice(0));
    }
}
