// A wait on a kernel that does not end in time (finish_within, common/device.hpp): the program must end
// with exit 3 and a message naming the work and the limit, at once, instead of waiting for the kernel as
// cudaStreamSynchronize, or the CUDA runtime's teardown at exit, would. The kernel spins for 30 s; the test
// runs with a limit of 1 s and a CTest timeout of 20 s. With --forward, the propagator's forward modelling
// waits behind such a kernel.
//
// With --mpi, under mpirun with 2 ranks (hung_kernel_wait_mpi.sh): rank 0 gives up on its kernel while rank 1
// waits for it in a barrier of 60 s; rank 0's MPI_Abort must end rank 1 too, at once, even where mpirun
// would let it run on.
#include <cuda_runtime.h>
#include <mpi.h>

#include <cstring>
#include <string>

#include "cuda_check.hpp"
#include "device.hpp"
#include "errors.hpp"
#include "gpu_propagator.hpp"
#include "gpu_resources.hpp"
#include "mpi_env.hpp"

namespace {

__global__ void spin_kernel(unsigned long long nanoseconds) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < nanoseconds);
}

int spin_and_give_up() {
    fwi::require_gpus(1);
    const fwi::CudaStream stream(0);
    spin_kernel<<<1, 1, 0, stream.get()>>>(30'000'000'000ull);
    CUDA_CHECK_LAUNCH();
    fwi::finish_within(stream, 1.0, "a kernel that spins for 30 s");
    return fwi::kExitOk;  // not reached: the kernel outlasts the limit
}

// The propagator's forward modelling behind a kernel that spins: its wait must have a limit too, and end the
// program in time, not only once the kernel is done (a copy of the traces into pageable memory, queued behind
// the kernel, would wait for it without one). Run with FWI_TEST_GPU_WORK_BASE_S=1: a limit of about 1 s.
int spin_before_forward() {
    fwi::require_gpus(1);
    const fwi::Problem problem = fwi::problem_preset("small");
    fwi::GpuPropagator propagator(problem, fwi::initial_model(problem));
    spin_kernel<<<1, 1, 0, propagator.stream()>>>(30'000'000'000ull);
    CUDA_CHECK_LAUNCH();
    propagator.forward({0});
    return fwi::kExitOk;  // not reached: the kernel outlasts the limit
}

}  // namespace

int main(int argc, char** argv) {
    if (argc >= 2 && std::strcmp(argv[1], "--forward") == 0)
        return fwi::run_program("hung_kernel_wait", spin_before_forward);
    if (argc < 2 || std::strcmp(argv[1], "--mpi") != 0) return fwi::run_program("hung_kernel_wait", spin_and_give_up);
    return fwi::run_mpi_program("hung_kernel_wait", argc, argv, [] {
        // As jobs of one rank each (a launcher of another MPI library), no rank would wait for another.
        if (fwi::world_size() != 2)
            throw fwi::EnvironmentError("--mpi needs one MPI job of 2 ranks, not " + std::to_string(fwi::world_size()));
        if (fwi::world_rank() == 0) return spin_and_give_up();
        fwi::barrier_with_timeout(MPI_COMM_WORLD, "rank 0, whose kernel spins", 60.0);
        return int(fwi::kExitOk);
    });
}
