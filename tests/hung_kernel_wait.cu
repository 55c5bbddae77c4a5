// A wait on a kernel that does not end in time (finish_within, common/device.hpp): the program must end
// with exit 3 and a message naming the work and the limit, at once, instead of waiting for the kernel as
// cudaStreamSynchronize, or the CUDA runtime's teardown at exit, would. The kernel spins for 30 s; the test
// runs with a limit of 1 s and a CTest timeout of 20 s.
#include <cuda_runtime.h>

#include "cuda_check.hpp"
#include "device.hpp"
#include "errors.hpp"
#include "gpu_resources.hpp"

namespace {

__global__ void spin_kernel(unsigned long long nanoseconds) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < nanoseconds);
}

}  // namespace

int main() {
    return fwi::run_program("hung_kernel_wait", [] {
        fwi::require_gpus(1);
        const fwi::CudaStream stream(0);
        spin_kernel<<<1, 1, 0, stream.get()>>>(30'000'000'000ull);
        CUDA_CHECK_LAUNCH();
        fwi::finish_within(stream, 1.0, "a kernel that spins for 30 s");
        return fwi::kExitOk;  // not reached: the kernel outlasts the limit
    });
}
