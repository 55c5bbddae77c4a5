// LD_PRELOAD shim for the test "no host copies in an iteration": counts the cudaMemcpy and
// cudaMemcpyAsync calls a process makes between host and device, by direction, and prints the counts
// at exit on stderr:
//   copy-counter: pid 1234: to-device 3 copies 2359296 bytes, to-host 5 copies 3932160 bytes
// Only copies of at least 1 KiB count: the gradient (0.8 MB on the default problem) and the model move
// in copies that large, the 8-byte misfit does not. The program must use the shared CUDA runtime
// (libcudart.so), which is what the suite links, or the shim sees nothing; the test's control run (03,
// which copies by design) catches that.
#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdio>

// The values of cudaMemcpyKind and the success code, from cuda_runtime_api.h, so the shim needs no
// CUDA headers to build.
enum { kHostToDevice = 1, kDeviceToHost = 2, kDefault = 4 };
enum { kMinBytes = 1024 };

namespace {

std::atomic<long> to_device_copies, to_device_bytes, to_host_copies, to_host_bytes, default_copies;

void count(size_t bytes, int kind) {
    if (bytes < kMinBytes) return;
    if (kind == kHostToDevice) {
        to_device_copies += 1;
        to_device_bytes += static_cast<long>(bytes);
    } else if (kind == kDeviceToHost) {
        to_host_copies += 1;
        to_host_bytes += static_cast<long>(bytes);
    } else if (kind == kDefault) {
        default_copies += 1;  // direction unknown here: reported apart
    }
}

using MemcpyFn = int (*)(void*, const void*, size_t, int);
using MemcpyAsyncFn = int (*)(void*, const void*, size_t, int, void*);

}  // namespace

extern "C" {

int cudaMemcpy(void* dst, const void* src, size_t bytes, int kind) {
    static const auto real = reinterpret_cast<MemcpyFn>(dlsym(RTLD_NEXT, "cudaMemcpy"));
    count(bytes, kind);
    return real(dst, src, bytes, kind);
}

int cudaMemcpyAsync(void* dst, const void* src, size_t bytes, int kind, void* stream) {
    static const auto real = reinterpret_cast<MemcpyAsyncFn>(dlsym(RTLD_NEXT, "cudaMemcpyAsync"));
    count(bytes, kind);
    return real(dst, src, bytes, kind, stream);
}

__attribute__((destructor)) static void report() {
    fprintf(stderr, "copy-counter: pid %d: to-device %ld copies %ld bytes, to-host %ld copies %ld bytes, default %ld\n",
            static_cast<int>(getpid()), to_device_copies.load(), to_device_bytes.load(), to_host_copies.load(),
            to_host_bytes.load(), default_copies.load());
}

}  // extern "C"
