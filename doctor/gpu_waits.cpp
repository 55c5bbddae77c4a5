#include "gpu_waits.hpp"

#include "cuda_check.hpp"
#include "device.hpp"
#include "errors.hpp"

namespace fwi::doctor {

void wait_for_event(cudaEvent_t event, const Deadline& deadline, const std::string& what) {
    if (wait_for_event_within(event, deadline.remaining())) return;
    abandon_gpu_work();
    throw DeviceHang(what, deadline.seconds());
}

void finish(const CudaStream& stream, const Deadline& deadline, const std::string& what) {
    const CudaEvent done(stream.device());
    CUDA_CHECK(cudaEventRecord(done.get(), stream.get()));
    wait_for_event(done.get(), deadline, what);
}

}  // namespace fwi::doctor
