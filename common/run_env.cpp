#include "run_env.hpp"

#include <cuda.h>
#include <cuda_runtime_api.h>  // for CUDART_VERSION only: nothing here calls the runtime
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <exception>
#include <mutex>
#include <type_traits>
#include <utility>
#include <vector>

#include "nvml.hpp"

namespace fwi {

namespace {

// The CUDA driver calls the env needs, from libcuda.so.1 (it comes with the driver), loaded at run time
// so that fwi_core links no CUDA library. Its device ordinals are the CUDA runtime's: both number the
// GPUs that CUDA_VISIBLE_DEVICES leaves visible, in the same order.
struct CudaDriver {
    decltype(&cuInit) init = nullptr;
    decltype(&cuDriverGetVersion) driver_version = nullptr;
    decltype(&cuDeviceGetCount) device_count = nullptr;
    decltype(&cuDeviceGet) device = nullptr;
    decltype(&cuDeviceGetName) name = nullptr;
    decltype(&cuDeviceGetPCIBusId) pci_bus_id = nullptr;
    decltype(&cuDeviceTotalMem) total_memory = nullptr;  // cuDeviceTotalMem_v2 (cuda.h renames it)
    decltype(&cuDeviceGetAttribute) attribute = nullptr;
    decltype(&cuDeviceCanAccessPeer) can_access_peer = nullptr;

    // False when the library or one of the calls is missing (no driver: a CI machine).
    bool load() {
        // Never closed: the CUDA runtime of the same process uses the same library.
        void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!library) return false;
        const auto symbol = [library](auto& function, const char* name) {
            function = reinterpret_cast<std::remove_reference_t<decltype(function)>>(dlsym(library, name));
            return function != nullptr;
        };
        return symbol(init, "cuInit") && symbol(driver_version, "cuDriverGetVersion") &&
               symbol(device_count, "cuDeviceGetCount") && symbol(device, "cuDeviceGet") &&
               symbol(name, "cuDeviceGetName") && symbol(pci_bus_id, "cuDeviceGetPCIBusId") &&
               symbol(total_memory, "cuDeviceTotalMem_v2") && symbol(attribute, "cuDeviceGetAttribute") &&
               symbol(can_access_peer, "cuDeviceCanAccessPeer");
    }
};

// One visible GPU as the env lists it; `pci` receives its address for NVML. A query the driver refuses
// leaves its field null, which scripts/result_schema.py flags: a GPU its driver cannot describe makes
// every figure measured on it suspect.
JsonObject describe_gpu(const CudaDriver& cuda, int index, CUdevice device, PciAddress& pci) {
    const auto known = [](CUresult status, const JsonValue& value) { return status == CUDA_SUCCESS ? value : nullptr; };
    char name[256] = {};
    const CUresult named = cuda.name(name, sizeof name - 1, device);
    char bus_id[32] = {};
    const CUresult located = cuda.pci_bus_id(bus_id, sizeof bus_id - 1, device);
    size_t memory = 0;
    const CUresult measured = cuda.total_memory(&memory, device);
    int major = 0, minor = 0;
    const CUresult versioned =
        cuda.attribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device) == CUDA_SUCCESS
            ? cuda.attribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device)
            : CUDA_ERROR_UNKNOWN;
    pci.bus_id = bus_id;
    cuda.attribute(reinterpret_cast<int*>(&pci.domain), CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, device);
    cuda.attribute(reinterpret_cast<int*>(&pci.bus), CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, device);
    cuda.attribute(reinterpret_cast<int*>(&pci.device), CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, device);
    return JsonObject()
        .add("index", index)
        .add("name", known(named, name))
        .add("pci_bus_id", known(located, bus_id))
        .add("memory_bytes", known(measured, memory))
        .add("sm", known(versioned, "sm_" + std::to_string(major) + std::to_string(minor)));
}

// "none" without peer access both ways; else NVML's answer: "NVLink" or "PCIe", "unknown" without NVML.
std::string link_kind(bool peer_access, const std::vector<Link>& links, size_t at) {
    if (!peer_access) return "none";
    if (links.empty()) return "unknown";
    return links[at].nvlinks > 0 ? "NVLink" : "PCIe";
}

// gpu_count, gpus, driver_version, nvidia_driver_version, cuda_runtime_version and links.
JsonObject collect_gpu_fields() {
    CudaDriver cuda;
    int driver_version = 0, count = 0;
    if (cuda.load()) {
        cuda.driver_version(&driver_version);
        // cuInit fails without a usable GPU (CUDA_ERROR_NO_DEVICE when CUDA_VISIBLE_DEVICES hides them all).
        if (cuda.init(0) != CUDA_SUCCESS || cuda.device_count(&count) != CUDA_SUCCESS) count = 0;
    }
    std::vector<CUdevice> devices(count, 0);
    std::vector<PciAddress> pci(count);
    std::vector<JsonObject> gpus;
    for (int index = 0; index < count; ++index) {
        cuda.device(&devices[index], index);
        gpus.push_back(describe_gpu(cuda, index, devices[index], pci[index]));
    }

    const Nvml nvml;
    std::vector<Link> links;
    try {
        if (count > 1) links = nvml.links(pci);
    } catch (const std::exception&) {
        links.clear();  // NVML is missing or does not know a GPU: the links say "unknown"
    }
    std::vector<JsonObject> pairs;
    for (int a = 0; a < count; ++a)
        for (int b = a + 1; b < count; ++b) {
            int ab = 0, ba = 0;
            const bool peer_access = cuda.can_access_peer(&ab, devices[a], devices[b]) == CUDA_SUCCESS &&
                                     cuda.can_access_peer(&ba, devices[b], devices[a]) == CUDA_SUCCESS && ab && ba;
            pairs.push_back(JsonObject()
                                .add("gpus", std::vector<int>{a, b})
                                .add("link", link_kind(peer_access, links, size_t(a) * count + b)));
        }

    const std::string nvidia_driver = nvml.driver_version();
    return JsonObject()
        .add("gpu_count", count)
        .add("gpus", gpus)
        .add("driver_version", driver_version ? JsonValue(cuda_version_text(driver_version)) : nullptr)
        .add("nvidia_driver_version", nvidia_driver.empty() ? nullptr : JsonValue(nvidia_driver))
        .add("cuda_runtime_version", cuda_version_text(CUDART_VERSION))
        .add("links", pairs);
}

// What does not change during a run, collected once.
struct Machine {
    std::string hostname = host_name();
    JsonObject gpu_fields = collect_gpu_fields();
};

const Machine& machine() {
    static const Machine facts;
    return facts;
}

std::string utc_now() {
    const std::time_t now = std::time(nullptr);
    std::tm utc{};
    gmtime_r(&now, &utc);
    char text[32];
    std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
    return text;
}

std::mutex& environment_mutex() {
    static std::mutex mutex;
    return mutex;
}

// Every NCCL_* variable of the process, sorted by name.
JsonObject nccl_variables() {
    std::vector<std::pair<std::string, std::string>> found;
    for (const std::string& text : environment_entries()) {
        const size_t equals = text.find('=');
        if (text.rfind("NCCL_", 0) == 0 && equals != std::string::npos)
            found.emplace_back(text.substr(0, equals), text.substr(equals + 1));
    }
    std::sort(found.begin(), found.end());
    JsonObject json;
    for (const auto& [name, value] : found) json.add(name, value);
    return json;
}

struct Registry {
    std::mutex mutex;
    std::vector<std::pair<std::string, JsonValue>> fields{{"nccl_version", nullptr}, {"mpi_library_version", nullptr}};
};

Registry& registry() {
    static Registry instance;
    return instance;
}

}  // namespace

std::string build_cuda_architectures() { return FWI_CUDA_ARCHITECTURES; }

std::string cuda_version_text(int version) {
    return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

void set_environment_variable(const char* name, const char* value) {
    const std::lock_guard<std::mutex> lock(environment_mutex());
    setenv(name, value, 1);
}

void unset_environment_variable(const char* name) {
    const std::lock_guard<std::mutex> lock(environment_mutex());
    unsetenv(name);
}

std::vector<std::string> environment_entries() {
    const std::lock_guard<std::mutex> lock(environment_mutex());
    std::vector<std::string> entries;
    for (char** entry = environ; entry && *entry; ++entry) entries.emplace_back(*entry);
    return entries;
}

std::string host_name() {
    char name[256] = {};
    gethostname(name, sizeof name - 1);
    return name;
}

void set_env_field(const std::string& key, const JsonValue& value) {
    Registry& fields = registry();
    std::lock_guard<std::mutex> lock(fields.mutex);
    const auto same_key = [&key](const auto& field) { return field.first == key; };
    const auto existing = std::find_if(fields.fields.begin(), fields.fields.end(), same_key);
    if (existing != fields.fields.end())
        existing->second = value;
    else
        fields.fields.emplace_back(key, value);
}

JsonObject run_env_json() {
    JsonObject env;
    // The build's identity comes from CMake (common/CMakeLists.txt).
    env.add("hostname", machine().hostname)
        .add("utc_time", utc_now())
        .add("git_commit", FWI_GIT_COMMIT)
        .add("build_type", FWI_BUILD_TYPE)
        .add("cuda_architectures", build_cuda_architectures())
        .append(machine().gpu_fields);
    {
        Registry& fields = registry();
        std::lock_guard<std::mutex> lock(fields.mutex);
        for (const auto& [key, value] : fields.fields) env.add(key, value);
    }
    return env.add("nccl_env", nccl_variables());
}

}  // namespace fwi
