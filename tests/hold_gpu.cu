// Holds a context on GPU 0 for the test of the lessons' warning about other processes on their GPUs
// (other_processes_warning.sh): prints "holding" once the context exists, then sleeps until killed, or
// for SECONDS (at most 600) so that a test that dies cannot leave it behind for long.
//
// usage: hold_gpu SECONDS
#include <cuda_runtime.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
    const int seconds = argc == 2 ? std::atoi(argv[1]) : 0;
    if (seconds < 1 || seconds > 600) {
        std::fprintf(stderr, "usage: hold_gpu SECONDS (1..600)\n");
        return 2;
    }
    if (cudaSetDevice(0) != cudaSuccess || cudaFree(nullptr) != cudaSuccess) {
        std::fprintf(stderr, "hold_gpu: no context on GPU 0\n");
        return 3;
    }
    std::printf("holding\n");
    std::fflush(stdout);
    sleep(unsigned(seconds));
    return 0;
}
