#include "cuda_check.hpp"
#include "cuda_timing.hpp"
#include "device_combine.hpp"
#include "errors.hpp"

namespace fwi {

namespace {

void create_events(std::vector<CudaEvent>& events, size_t count) {
    while (events.size() < count) events.emplace_back(current_device(), CudaEvent::Timing::on);
}

}  // namespace

// Both streams are blocking streams: they wait for work the caller queued on the
// legacy default stream, such as the bench's upload of its buffer. Work on a non-blocking stream, such
// as the FWI run's gradient, the caller waits for before combine() (its contract).
CudaStagingCopies::CudaStagingCopies(float* device, float* host)
    : device_(device),
      host_(host),
      to_host_stream_(current_device(), CudaStream::Kind::blocking),
      to_device_stream_(current_device(), CudaStream::Kind::blocking) {}

void CudaStagingCopies::begin(size_t chunks) {
    create_events(to_host_started_, chunks);  // kept for the next combine: creating events costs microseconds
    create_events(arrived_, chunks);
    create_events(to_device_started_, chunks);
    create_events(to_device_done_, chunks);
    chunks_ = chunks;
}

void CudaStagingCopies::start_to_host(size_t index, const Chunk& chunk) {
    CUDA_CHECK(cudaEventRecord(to_host_started_[index].get(), to_host_stream_.get()));
    CUDA_CHECK(cudaMemcpyAsync(host_ + chunk.offset, device_ + chunk.offset, chunk.count * sizeof(float),
                               cudaMemcpyDeviceToHost, to_host_stream_.get()));
    CUDA_CHECK(cudaEventRecord(arrived_[index].get(), to_host_stream_.get()));
}

bool CudaStagingCopies::arrived_on_host(size_t index) {
    const cudaError_t status = cudaEventQuery(arrived_[index].get());
    if (status == cudaErrorNotReady) return false;
    CUDA_CHECK(status);
    return true;
}

void CudaStagingCopies::wait_on_host(size_t index) { CUDA_CHECK(cudaEventSynchronize(arrived_[index].get())); }

void CudaStagingCopies::start_to_device(size_t index, const Chunk& chunk) {
    CUDA_CHECK(cudaEventRecord(to_device_started_[index].get(), to_device_stream_.get()));
    CUDA_CHECK(cudaMemcpyAsync(device_ + chunk.offset, host_ + chunk.offset, chunk.count * sizeof(float),
                               cudaMemcpyHostToDevice, to_device_stream_.get()));
    CUDA_CHECK(cudaEventRecord(to_device_done_[index].get(), to_device_stream_.get()));
}

void CudaStagingCopies::wait_on_device() { CUDA_CHECK(cudaStreamSynchronize(to_device_stream_.get())); }

// The lanes may wait between copies (for a sum to finish, for the next copy to be queued): add up each
// copy's own time.
double CudaStagingCopies::to_host_busy_seconds() {
    double seconds = 0.0;
    for (size_t k = 0; k < chunks_; ++k) seconds += elapsed_seconds(to_host_started_[k], arrived_[k]);
    return seconds;
}

double CudaStagingCopies::to_device_busy_seconds() {
    double seconds = 0.0;
    for (size_t k = 0; k < chunks_; ++k) seconds += elapsed_seconds(to_device_started_[k], to_device_done_[k]);
    return seconds;
}

DeviceCombine::DeviceCombine(const VariantSpec& spec, float* device, size_t max_count, MPI_Comm comm, double timeout_s)
    : spec_(spec), device_(device), comm_(comm) {
    if (spec.name == "cuda_aware") {
        unavailable_reason_ = cuda_aware_unavailable_reason(timeout_s);
        return;
    }
    float* host = nullptr;
    if (spec.name == "pageable") {
        pageable_.assign(max_count, 0.0f);  // touched now, so no page faults inside the timed combines
        host = pageable_.data();
    } else {
        pinned_ = PinnedBuffer<float>(max_count);
        host = pinned_.data();
    }
    copies_ = std::make_unique<CudaStagingCopies>(device, host);
}

CombineTimes DeviceCombine::combine(size_t count) {
    if (!unavailable_reason_.empty()) throw EnvironmentError(spec_.name + ": " + unavailable_reason_);
    if (spec_.name == "cuda_aware") return combine_cuda_aware(device_, count, comm_);
    if (spec_.name == "pipelined") return combine_pipelined(*copies_, count, spec_.pipeline, comm_);
    return combine_whole(*copies_, count, comm_);
}

}  // namespace fwi
