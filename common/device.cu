#include "device.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>

#include "cuda_timing.hpp"
#include "errors.hpp"
#include "gpu_resources.hpp"
#include "launch_env.hpp"
#include "other_processes.hpp"
#include "output.hpp"
#include "polling.hpp"
#include "run_env.hpp"
#include "timing.hpp"

namespace fwi {

namespace {
// cudaGetDeviceCount with its failure cleared: `count` is 0 where it fails.
cudaError_t count_gpus(int& count) {
    count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) {
        cudaGetLastError();  // clear the sticky "no device" error
        count = 0;
    }
    return status;
}
}  // namespace

bool wait_for_event_within(cudaEvent_t event, double timeout_s) {
    constexpr double kLongestPollStep = 1.0;  // s; the polls below follow each other within 0.1 ms
    constexpr double kSpinSeconds = 0.2;
    cudaError_t error = cudaSuccess;
    const WaitOutcome outcome = poll_until_done(
        [&] {
            error = cudaEventQuery(event);
            if (error == cudaSuccess) return PollStatus::done;
            return error == cudaErrorNotReady ? PollStatus::pending : PollStatus::failed;
        },
        // Time the process was stopped (a debugger at a breakpoint, Ctrl-Z) is no sign of a hang.
        timeout_s, clock_without_stops(steady_seconds, kLongestPollStep),
        // A gradient of the default or comm problem ends within the spin, and so within a poll of its end.
        spin_then_sleep(kSpinSeconds));
    if (outcome == WaitOutcome::failed) throw_cuda_error(error, "cudaEventQuery(event)", __FILE__, __LINE__);
    return outcome == WaitOutcome::done;
}

namespace {
// compute-sanitizer starts a program with its injection library, which finds the tool through this variable.
bool under_compute_sanitizer() { return std::getenv("NV_SANITIZER_INJECTION_PORT_BASE") != nullptr; }
// How much longer the limits on GPU work are under it: the small problem's `01 --verify` took 26 s under its
// racecheck against 5 s without (most of both the CPU reference) on an H200, and a slower GPU must not read as
// a hung one there.
constexpr double kUnderSanitizerScale = 20.0;
}  // namespace

void finish_within(const CudaStream& stream, double timeout_s, const std::string& what) {
    const CudaEvent done(stream.device());
    CUDA_CHECK(cudaEventRecord(done.get(), stream.get()));
    if (wait_for_event_within(done.get(), timeout_s)) return;
    abandon_gpu_work();
    throw EnvironmentError(
        "GPU " + std::to_string(stream.device()) + " has not finished " + what + " within " +
        format_seconds(timeout_s) + " s" +
        (under_compute_sanitizer()
             ? " (under compute-sanitizer: " + format_number(kUnderSanitizerScale) + " times the usual limit)"
             : std::string()) +
        ", a limit far above what it takes on any GPU: the GPU may hang (nvidia-smi shows it "
        "busy with no end; dmesg may show an Xid error), or be shared with far heavier work "
        "(nvidia-smi lists the processes on it)");
}

double gpu_work_limit_seconds(double cell_updates) {
    constexpr double kSlowestUpdatesPerSecond = 1e8;
    const double scale = under_compute_sanitizer() ? kUnderSanitizerScale : 1.0;
    return scale * (gpu_work_base_seconds() + cell_updates / kSlowestUpdatesPerSecond);
}

int visible_gpu_count() {
    int count = 0;
    count_gpus(count);
    return count;
}

namespace {
int installed_driver_version() {
    int driver = 0;
    cudaDriverGetVersion(&driver);  // 0 where libcuda.so.1 is missing
    return driver;
}

// What to do when counting the GPUs failed with `status`. Without any driver the runtime also says
// "insufficient driver"; the driver's version tells the two apart.
std::string gpu_count_hint(cudaError_t status) {
    const int driver = installed_driver_version();
    int runtime = 0;
    cudaRuntimeGetVersion(&runtime);
    if (status == cudaErrorInsufficientDriver && driver > 0 && driver < runtime)
        return "the NVIDIA driver supports CUDA " + cuda_version_text(driver) +
               ", older than the CUDA runtime this program was built with (" + cuda_version_text(runtime) +
               "): " + older_driver_advice(driver, runtime);
    if (driver > 0)  // a driver new enough that cannot reach the GPUs: a container without them, say
        return "the NVIDIA driver is installed, but CUDA cannot reach the GPUs: check nvidia-smi, the /dev/nvidia* "
               "devices (a container needs the GPUs passed in) and CUDA_VISIBLE_DEVICES; build/doctor/doctor says "
               "what is wrong";
    return "check nvidia-smi and CUDA_VISIBLE_DEVICES; build/doctor/doctor says what is wrong";
}
}  // namespace

bool driver_makes_programmatic_edges() { return installed_driver_version() >= 12030; }

namespace {
// The graph calls that take edge data are named *_v2 in CUDA 12 and plain from CUDA 13 on.
#if CUDART_VERSION >= 13000
constexpr auto graph_get_edges = cudaGraphGetEdges;
constexpr auto graph_remove_edges = cudaGraphRemoveDependencies;
constexpr auto graph_add_edges = cudaGraphAddDependencies;
#else
constexpr auto graph_get_edges = cudaGraphGetEdges_v2;
constexpr auto graph_remove_edges = cudaGraphRemoveDependencies_v2;
constexpr auto graph_add_edges = cudaGraphAddDependencies_v2;
#endif
}  // namespace

void make_kernel_edges_programmatic(cudaGraph_t graph) {
    size_t count = 0;
    CUDA_CHECK(graph_get_edges(graph, nullptr, nullptr, nullptr, &count));
    std::vector<cudaGraphNode_t> from(count), to(count);
    std::vector<cudaGraphEdgeData> edges(count);
    CUDA_CHECK(graph_get_edges(graph, from.data(), to.data(), edges.data(), &count));
    const auto is_kernel = [](cudaGraphNode_t node) {
        cudaGraphNodeType type;
        CUDA_CHECK(cudaGraphNodeGetType(node, &type));
        return type == cudaGraphNodeTypeKernel;
    };
    size_t kept = 0;
    for (size_t e = 0; e < count; ++e) {
        if (!is_kernel(from[e]) || !is_kernel(to[e])) continue;
        from[kept] = from[e];
        to[kept] = to[e];
        edges[kept] = edges[e];
        ++kept;
    }
    CUDA_CHECK(graph_remove_edges(graph, from.data(), to.data(), edges.data(), kept));
    for (size_t e = 0; e < kept; ++e) {
        edges[e].from_port = cudaGraphKernelNodePortProgrammatic;
        edges[e].type = cudaGraphDependencyTypeProgrammatic;
    }
    CUDA_CHECK(graph_add_edges(graph, from.data(), to.data(), edges.data(), kept));
}

int visible_gpu_count_checked() {
    int count = 0;
    const cudaError_t status = count_gpus(count);
    if (status == cudaSuccess || status == cudaErrorNoDevice || installed_driver_version() == 0) return count;
    throw EnvironmentError("the NVIDIA driver is installed but CUDA cannot count the GPUs (" +
                           std::string(cudaGetErrorName(status)) + "): " + gpu_count_hint(status));
}

void require_gpus(int needed) {
    int count = 0;
    const cudaError_t status = count_gpus(count);
    if (count >= needed) return;
    const std::string hint =
        count >= 1 ? too_few_gpus_hint(count, std::getenv("CUDA_VISIBLE_DEVICES")) : gpu_count_hint(status);
    throw EnvironmentError("this program needs " + count_of(needed, "CUDA GPU") + " and " + std::to_string(count) +
                           (count == 1 ? " is" : " are") + " visible (" + hint + ")");
}

void warn_of_other_processes(int first, int count, const std::vector<unsigned>& job_processes,
                             const std::string& where) {
    // Each GPU once per process: later this process holds a context there itself, which where the driver
    // lists another namespace's pids (a container) would read as another process.
    static std::mutex checked_mutex;
    static std::set<int> checked;
    {
        const std::lock_guard<std::mutex> lock(checked_mutex);
        bool all_checked = true;
        for (int device = first; device < first + count; ++device) all_checked &= !checked.insert(device).second;
        if (all_checked) return;
    }
    const Nvml nvml;
    std::vector<PciAddress> gpus;
    for (int device = first; device < first + count; ++device) gpus.push_back(gpu_pci_address(device));
    std::vector<unsigned> own = job_processes;
    own.push_back(static_cast<unsigned>(getpid()));
    OtherProcesses others = find_other_processes(nvml, gpus, own, false);
    if (others.named.empty()) return;  // none, or none that can be listed: nothing to say
    for (OtherProcess& other : others.named) other.gpu += first;
    print_warning(where + "other processes hold a GPU this run uses; where they compute, the times it measures " +
                  "are slower and vary: " + join(other_process_lines(others), "; "));
}

PciAddress gpu_pci_address(int device) {
    PciAddress address;
    char bus_id[32] = {};
    CUDA_CHECK(cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, device));
    address.bus_id = bus_id;
    CUDA_CHECK(cudaDeviceGetAttribute(reinterpret_cast<int*>(&address.domain), cudaDevAttrPciDomainId, device));
    CUDA_CHECK(cudaDeviceGetAttribute(reinterpret_cast<int*>(&address.bus), cudaDevAttrPciBusId, device));
    CUDA_CHECK(cudaDeviceGetAttribute(reinterpret_cast<int*>(&address.device), cudaDevAttrPciDeviceId, device));
    return address;
}

bool gpu_takes_one_process(int device) {
    int mode = cudaComputeModeDefault;
    CUDA_CHECK(cudaDeviceGetAttribute(&mode, cudaDevAttrComputeMode, device));
    return mode == cudaComputeModeExclusiveProcess;
}

bool every_pair_has_peer_access(int count) {
    for (int device = 0; device < count; ++device)
        for (int peer = 0; peer < count; ++peer) {
            if (peer == device) continue;
            int possible = 0;
            CUDA_CHECK(cudaDeviceCanAccessPeer(&possible, device, peer));
            if (!possible) return false;
        }
    return true;
}

std::string describe_device(int device) {
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    char text[512];
    std::snprintf(text, sizeof text, "%s (sm_%d%d, %d SMs, %.1f GiB)", prop.name, prop.major, prop.minor,
                  prop.multiProcessorCount, gib(prop.totalGlobalMem));
    return text;
}

size_t device_memory_bytes(int device) {
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    return prop.totalGlobalMem;
}

namespace {
__global__ void build_code_probe() {}
}  // namespace

BuildCode build_code_for(int device) {
    int current = 0;
    CUDA_CHECK(cudaGetDevice(&current));
    CUDA_CHECK(cudaSetDevice(device));
    cudaFuncAttributes attributes{};
    const cudaError_t status = cudaFuncGetAttributes(&attributes, build_code_probe);
    CUDA_CHECK(cudaSetDevice(current));
    switch (status) {
        case cudaSuccess:
            return {true, attributes.ptxVersion, attributes.binaryVersion, ""};
        // The errors of loading a build's code on a GPU: none for its architecture, or PTX the driver
        // cannot compile (from a newer toolkit than the driver, or without the driver's compiler).
        case cudaErrorNoKernelImageForDevice:
        case cudaErrorUnsupportedPtxVersion:
        case cudaErrorInvalidPtx:
        case cudaErrorInvalidKernelImage:
        case cudaErrorJitCompilerNotFound:
        case cudaErrorJitCompilationDisabled:
            cudaGetLastError();  // not sticky, but keep the next CUDA_CHECK_LAUNCH from seeing it
            return {false, 0, 0, cudaGetErrorName(status)};
        default:
            CUDA_CHECK(status);
            return {};
    }
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
