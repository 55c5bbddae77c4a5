#include "device.hpp"

#include <cstdio>

#include "cuda_timing.hpp"
#include "errors.hpp"
#include "timing.hpp"

namespace fwi {

int visible_gpu_count() {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
        cudaGetLastError();  // clear the sticky "no device" error
        return 0;
    }
    return count;
}

void require_gpus(int needed) {
    const int count = visible_gpu_count();
    if (count >= needed) return;
    throw EnvironmentError("this program needs " + std::to_string(needed) + " CUDA GPU" + (needed > 1 ? "s" : "") +
                           " and " + std::to_string(count) +
                           " are visible (check nvidia-smi and CUDA_VISIBLE_DEVICES)");
}

std::string describe_device(int device) {
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    char text[512];
    std::snprintf(text, sizeof text, "%s (sm_%d%d, %d SMs, %.1f GiB)", prop.name, prop.major, prop.minor,
                  prop.multiProcessorCount, gib(prop.totalGlobalMem));
    return text;
}

double measure_copy_bandwidth(size_t bytes) {
    DeviceBuffer<char> source(bytes), destination(bytes);
    CUDA_CHECK(cudaMemset(source.data(), 1, bytes));
    CudaEventTimer timer;
    std::vector<double> seconds;
    for (int repetition = 0; repetition < 12; ++repetition) {
        timer.start();
        CUDA_CHECK(cudaMemcpyAsync(destination.data(), source.data(), bytes, cudaMemcpyDeviceToDevice));
        timer.stop();
        if (repetition >= 2) seconds.push_back(timer.seconds());  // the first two are warm-up
    }
    return 2.0 * double(bytes) / median(seconds);
}

}  // namespace fwi
