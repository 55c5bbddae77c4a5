#include "device_update.hpp"

#include "cuda_check.hpp"
#include "device.hpp"
#include "update.hpp"

namespace fwi {

namespace {

constexpr int kBlock = 256;

// For non-negative floats the order of the bit patterns (as unsigned) is the order of the values, so
// atomicMax on the bits is a maximum of the floats.
__global__ void largest_kernel(const float* gradient, const float* weights, int nx, size_t first, size_t cells,
                               unsigned* largest_bits) {
    float largest = 0.0f;
    for (size_t i = first + blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < cells;
         i += size_t(gridDim.x) * blockDim.x)
        largest = fmaxf(largest, fabsf(scaled_gradient(gradient, weights, nx, i)));
    for (int offset = 16; offset > 0; offset /= 2)
        largest = fmaxf(largest, __shfl_down_sync(0xffffffffu, largest, offset));
    if (threadIdx.x % 32 == 0) atomicMax(largest_bits, __float_as_uint(largest));
}

__global__ void update_kernel(const float* gradient, const float* weights, int nx, size_t first, size_t cells,
                              const unsigned* largest_bits, float step_size, float v_min, float v_max,
                              float* velocity) {
    const float largest = __uint_as_float(*largest_bits);
    if (largest == 0.0f) return;  // a zero gradient leaves the model unchanged
    const float step = step_size / largest;
    for (size_t i = first + blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < cells;
         i += size_t(gridDim.x) * blockDim.x)
        velocity[i] = updated_velocity(velocity[i], scaled_gradient(gradient, weights, nx, i), step, v_min, v_max);
}

}  // namespace

DeviceModelUpdate::DeviceModelUpdate(const Problem& problem)
    : problem_(problem), depth_weights_(problem.nz), largest_bits_(1) {
    // Waited for here, with a limit: the update is then enqueued on streams that need not wait for this one.
    const CudaStream stream(current_device());
    depth_weights_.upload(depth_weights(problem), stream.get());
    finish_within(stream, gpu_work_limit_seconds(0.0), "the copy of the update's depth weights");
}

void DeviceModelUpdate::apply(const float* gradient, float* velocity, cudaStream_t stream) {
    const Problem& p = problem_;
    const size_t first = first_updated_cell(p), cells = p.model_cells();
    const unsigned blocks = grid_stride_blocks(cells, kBlock, 1024);
    CUDA_CHECK(cudaMemsetAsync(largest_bits_.data(), 0, sizeof(unsigned), stream));
    largest_kernel<<<blocks, kBlock, 0, stream>>>(gradient, depth_weights_.data(), p.nx, first, cells,
                                                  largest_bits_.data());
    CUDA_CHECK_LAUNCH();
    update_kernel<<<blocks, kBlock, 0, stream>>>(gradient, depth_weights_.data(), p.nx, first, cells,
                                                 largest_bits_.data(), float(p.step_size), float(p.v_min),
                                                 float(p.v_max), velocity);
    CUDA_CHECK_LAUNCH();
}

}  // namespace fwi
