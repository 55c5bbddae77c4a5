#include "nvml.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <utility>

namespace fwi {

namespace {

// The few declarations needed here, as in nvml.h (the header is not on every machine that builds this).
using NvmlReturn = int;  // nvmlReturn_t: 0 = NVML_SUCCESS
using NvmlDevice = struct NvmlDeviceOpaque*;
constexpr NvmlReturn kNvmlSuccess = 0;
constexpr NvmlReturn kNvmlInvalidArgument = 2;
constexpr NvmlReturn kNvmlNotSupported = 3;
constexpr NvmlReturn kNvmlInsufficientSize = 7;  // NVML_ERROR_INSUFFICIENT_SIZE: the list grew past the array
constexpr unsigned long long kNvmlValueNotAvailable = ~0ULL;
constexpr int kNvmlFeatureEnabled = 1;  // nvmlEnableState_t
constexpr int kNvlinkRemoteGpu = 0;     // nvmlIntNvLinkDeviceType_t
constexpr int kNvlinkRemoteSwitch = 2;
constexpr unsigned kMaxLinksProbed = 32;  // above NVML_NVLINK_MAX_LINKS (18 today)
constexpr unsigned kNvmlMigEnabled = 1;   // NVML_DEVICE_MIG_ENABLE
constexpr int kNvmlP2pCapsRead = 0;       // NVML_P2P_CAPS_INDEX_READ (nvmlGpuP2PCapsIndex_t)
constexpr int kNvmlP2pStatusOk = 0;       // NVML_P2P_STATUS_OK (nvmlGpuP2PStatus_t)

// nvmlPciInfo_t as the _v2 and _v3 calls fill it; only domain, bus and device are read, and those sit at the
// same offsets in the older layout too. The spare bytes guard against a longer future layout.
struct PciInfo {
    char bus_id_legacy[16];
    unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
    char bus_id[32];
    unsigned char spare[64];
};

// nvmlProcessInfo_t as the _v2 process list fills it, and the _v3 one of every driver but 535.43-535.86
// (the _v1 call's layout lacks the last two).
struct ProcessInfo {
    unsigned pid;
    unsigned long long used_gpu_memory;
    unsigned gpu_instance_id, compute_instance_id;
};

template <typename Function>
Function load(void* library, const char* name, const char* fallback = nullptr) {
    void* symbol = dlsym(library, name);
    if (!symbol && fallback) symbol = dlsym(library, fallback);
    return reinterpret_cast<Function>(symbol);
}

}  // namespace

struct Nvml::Api {
    void* library = nullptr;
    NvmlReturn (*init)() = nullptr;
    NvmlReturn (*shutdown)() = nullptr;
    const char* (*error_string)(NvmlReturn) = nullptr;
    NvmlReturn (*driver_version)(char*, unsigned) = nullptr;
    NvmlReturn (*count)(unsigned*) = nullptr;
    NvmlReturn (*handle_by_bus_id)(const char*, NvmlDevice*) = nullptr;
    NvmlReturn (*common_ancestor)(NvmlDevice, NvmlDevice, int*) = nullptr;
    NvmlReturn (*link_state)(NvmlDevice, unsigned, int*) = nullptr;
    NvmlReturn (*remote_pci)(NvmlDevice, unsigned, PciInfo*) = nullptr;
    NvmlReturn (*remote_type)(NvmlDevice, unsigned, int*) = nullptr;
    NvmlReturn (*compute_processes)(NvmlDevice, unsigned*, ProcessInfo*) = nullptr;
    NvmlReturn (*pcie_width)(NvmlDevice, unsigned*) = nullptr;
    NvmlReturn (*max_pcie_width)(NvmlDevice, unsigned*) = nullptr;
    NvmlReturn (*pcie_generation)(NvmlDevice, unsigned*) = nullptr;
    NvmlReturn (*max_pcie_generation)(NvmlDevice, unsigned*) = nullptr;
    NvmlReturn (*clock_event_reasons)(NvmlDevice, unsigned long long*) = nullptr;
    NvmlReturn (*handle_by_index)(unsigned, NvmlDevice*) = nullptr;
    NvmlReturn (*pci_info)(NvmlDevice, PciInfo*) = nullptr;
    NvmlReturn (*mig_mode)(NvmlDevice, unsigned*, unsigned*) = nullptr;  // current, pending
    NvmlReturn (*p2p_status)(NvmlDevice, NvmlDevice, int, int*) = nullptr;
    NvmlReturn (*pcie_replays)(NvmlDevice, unsigned*) = nullptr;
    NvmlReturn (*enforced_power_limit)(NvmlDevice, unsigned*) = nullptr;  // milliwatts
    NvmlReturn (*default_power_limit)(NvmlDevice, unsigned*) = nullptr;   // milliwatts

    // Whether the GPU is in MIG mode now (a GPU without MIG answers "not supported": not).
    bool mig_enabled(NvmlDevice handle) const {
        unsigned current = 0, pending = 0;
        return mig_mode && mig_mode(handle, &current, &pending) == kNvmlSuccess && current == kNvmlMigEnabled;
    }

    // The handle of the GPU at `gpu`; throws std::runtime_error naming it when NVML cannot find it.
    NvmlDevice device(const PciAddress& gpu) const {
        NvmlDevice handle = nullptr;
        const NvmlReturn status = handle_by_bus_id(gpu.bus_id.c_str(), &handle);
        if (status != kNvmlSuccess)
            throw std::runtime_error("NVML cannot find the GPU at PCI " + gpu.bus_id + ": " + describe(status));
        return handle;
    }

    // The NVLinks of the GPU that are up, by number, probing until the first error (past the last link);
    // false when NVML cannot say: the call missing, or an error at link 0 other than those of a GPU
    // without NVLink (not supported, or no such link).
    bool links_up(NvmlDevice handle, std::vector<unsigned>& up) const {
        up.clear();
        if (!link_state) return false;
        for (unsigned link = 0; link < kMaxLinksProbed; ++link) {
            int active = 0;
            const NvmlReturn status = link_state(handle, link, &active);
            if (status != kNvmlSuccess)
                return link > 0 || status == kNvmlNotSupported || status == kNvmlInvalidArgument;
            if (active == kNvmlFeatureEnabled) up.push_back(link);
        }
        return true;
    }

    // Whether NVLink `link` of the GPU ends at an NVSwitch (false where NVML cannot say).
    bool link_to_switch(NvmlDevice handle, unsigned link) const {
        int type = kNvlinkRemoteGpu;
        return remote_type && remote_type(handle, link, &type) == kNvmlSuccess && type == kNvlinkRemoteSwitch;
    }

    std::string describe(NvmlReturn status) const {
        return error_string ? error_string(status) : "NVML error " + std::to_string(status);
    }
};

std::string pcie_path_name(int nvml_topology_level) {
    switch (nvml_topology_level) {
        case 0:
            return "BRD";  // NVML_TOPOLOGY_INTERNAL: the same board
        case 10:
            return "PIX";  // NVML_TOPOLOGY_SINGLE: one PCIe switch
        case 20:
            return "PXB";  // NVML_TOPOLOGY_MULTIPLE: several PCIe switches, no host bridge
        case 30:
            return "PHB";  // NVML_TOPOLOGY_HOSTBRIDGE: a PCIe host bridge
        case 40:
            return "NODE";  // NVML_TOPOLOGY_NODE: host bridges within one NUMA node
        case 50:
            return "SYS";  // NVML_TOPOLOGY_SYSTEM: across NUMA nodes (the SMP interconnect)
        default:
            return "?";
    }
}

std::string link_label(const Link& link) {
    if (link.nvlinks > 0) return "NV" + std::to_string(link.nvlinks);
    return link.pcie.empty() ? "?" : link.pcie;
}

Nvml::Nvml() : api_(new Api) {
    api_->library = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!api_->library) {
        error_ = "NVML not available (libnvidia-ml.so.1 not found: it comes with the NVIDIA driver)";
        return;
    }
    void* library = api_->library;
    api_->init = load<decltype(api_->init)>(library, "nvmlInit_v2", "nvmlInit");
    api_->shutdown = load<decltype(api_->shutdown)>(library, "nvmlShutdown");
    api_->error_string = load<decltype(api_->error_string)>(library, "nvmlErrorString");
    api_->driver_version = load<decltype(api_->driver_version)>(library, "nvmlSystemGetDriverVersion");
    api_->count = load<decltype(api_->count)>(library, "nvmlDeviceGetCount_v2", "nvmlDeviceGetCount");
    api_->handle_by_bus_id = load<decltype(api_->handle_by_bus_id)>(library, "nvmlDeviceGetHandleByPciBusId_v2",
                                                                    "nvmlDeviceGetHandleByPciBusId");
    api_->common_ancestor = load<decltype(api_->common_ancestor)>(library, "nvmlDeviceGetTopologyCommonAncestor");
    api_->link_state = load<decltype(api_->link_state)>(library, "nvmlDeviceGetNvLinkState");
    api_->remote_pci = load<decltype(api_->remote_pci)>(library, "nvmlDeviceGetNvLinkRemotePciInfo_v2",
                                                        "nvmlDeviceGetNvLinkRemotePciInfo");
    api_->remote_type = load<decltype(api_->remote_type)>(library, "nvmlDeviceGetNvLinkRemoteDeviceType");
    // _v2 first: its layout (ProcessInfo) never changed, where drivers 535.43-535.86 filled _v3's list with a
    // longer one, which would be misread and overrun the array.
    api_->compute_processes = load<decltype(api_->compute_processes)>(
        library, "nvmlDeviceGetComputeRunningProcesses_v2", "nvmlDeviceGetComputeRunningProcesses_v3");
    api_->pcie_width = load<decltype(api_->pcie_width)>(library, "nvmlDeviceGetCurrPcieLinkWidth");
    api_->max_pcie_width = load<decltype(api_->max_pcie_width)>(library, "nvmlDeviceGetMaxPcieLinkWidth");
    api_->pcie_generation = load<decltype(api_->pcie_generation)>(library, "nvmlDeviceGetCurrPcieLinkGeneration");
    api_->max_pcie_generation =
        load<decltype(api_->max_pcie_generation)>(library, "nvmlDeviceGetMaxPcieLinkGeneration");
    // Renamed from "throttle reasons" in later drivers; the older name is still exported.
    api_->clock_event_reasons = load<decltype(api_->clock_event_reasons)>(
        library, "nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons");
    api_->handle_by_index =
        load<decltype(api_->handle_by_index)>(library, "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex");
    api_->pci_info = load<decltype(api_->pci_info)>(library, "nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo_v2");
    api_->mig_mode = load<decltype(api_->mig_mode)>(library, "nvmlDeviceGetMigMode");  // drivers since 450
    api_->p2p_status = load<decltype(api_->p2p_status)>(library, "nvmlDeviceGetP2PStatus");
    api_->pcie_replays = load<decltype(api_->pcie_replays)>(library, "nvmlDeviceGetPcieReplayCounter");
    api_->enforced_power_limit = load<decltype(api_->enforced_power_limit)>(library, "nvmlDeviceGetEnforcedPowerLimit");
    api_->default_power_limit =
        load<decltype(api_->default_power_limit)>(library, "nvmlDeviceGetPowerManagementDefaultLimit");
    if (!api_->init || !api_->shutdown || !api_->handle_by_bus_id) {
        error_ = "NVML not available (libnvidia-ml.so.1 lacks nvmlInit / nvmlDeviceGetHandleByPciBusId)";
        return;
    }
    const NvmlReturn status = api_->init();
    if (status != kNvmlSuccess) {
        error_ = "NVML not available (nvmlInit: " + api_->describe(status) + ")";
        return;
    }
    available_ = true;
}

Nvml::~Nvml() {
    if (available_) api_->shutdown();
    // The library stays loaded: NVML's own threads may outlive nvmlShutdown.
    delete api_;
}

std::string Nvml::driver_version() const {
    char version[96] = {};
    if (!available_ || !api_->driver_version || api_->driver_version(version, sizeof version - 1) != kNvmlSuccess)
        return "";
    return version;
}

int Nvml::gpu_count() const {
    unsigned count = 0;
    if (!available_ || !api_->count || api_->count(&count) != kNvmlSuccess) return -1;
    return static_cast<int>(count);
}

std::vector<Link> Nvml::links(const std::vector<PciAddress>& gpus) const {
    if (!available_) throw std::runtime_error(error_);
    const int n = static_cast<int>(gpus.size());
    std::vector<NvmlDevice> handles(n);
    for (int gpu = 0; gpu < n; ++gpu) {
        const NvmlReturn status = api_->handle_by_bus_id(gpus[gpu].bus_id.c_str(), &handles[gpu]);
        if (status != kNvmlSuccess)
            throw std::runtime_error("NVML cannot find GPU " + std::to_string(gpu) + " at PCI " + gpus[gpu].bus_id +
                                     ": " + api_->describe(status));
    }
    std::vector<Link> links(size_t(n) * n);
    std::vector<int> switch_links(n, 0);
    for (int gpu = 0; gpu < n; ++gpu) {
        std::vector<unsigned> up;
        api_->links_up(handles[gpu], up);  // none where NVML cannot say: the PCIe path still shows
        for (const unsigned link : up) {
            if (api_->link_to_switch(handles[gpu], link)) {
                ++switch_links[gpu];
                continue;
            }
            PciInfo remote{};
            if (!api_->remote_pci || api_->remote_pci(handles[gpu], link, &remote) != kNvmlSuccess) continue;
            for (int peer = 0; peer < n; ++peer)
                if (peer != gpu && remote.domain == gpus[peer].domain && remote.bus == gpus[peer].bus &&
                    remote.device == gpus[peer].device)
                    ++links[size_t(gpu) * n + peer].nvlinks;
        }
    }
    for (int gpu = 0; gpu < n; ++gpu)
        for (int peer = 0; peer < n; ++peer) {
            if (peer == gpu) continue;
            Link& link = links[size_t(gpu) * n + peer];
            link.nvlinks += std::min(switch_links[gpu], switch_links[peer]);
            int level = -1;
            if (api_->common_ancestor && api_->common_ancestor(handles[gpu], handles[peer], &level) == kNvmlSuccess)
                link.pcie = pcie_path_name(level);
        }
    return links;
}

bool Nvml::peer_readable(const PciAddress& a, const PciAddress& b) const {
    if (!available_) throw std::runtime_error(error_);
    if (!api_->p2p_status) throw std::runtime_error("this driver's NVML lacks nvmlDeviceGetP2PStatus");
    // Both ways, as check 2 counts peer access between two GPUs.
    const NvmlDevice first = api_->device(a), second = api_->device(b);
    for (const auto& [from, to] : {std::pair{first, second}, std::pair{second, first}}) {
        int p2p = -1;
        const NvmlReturn status = api_->p2p_status(from, to, kNvmlP2pCapsRead, &p2p);
        if (status != kNvmlSuccess) throw std::runtime_error("nvmlDeviceGetP2PStatus: " + api_->describe(status));
        if (p2p != kNvmlP2pStatusOk) return false;
    }
    return true;
}

PcieLink Nvml::pcie_link(const PciAddress& gpu) const {
    if (!available_) throw std::runtime_error(error_);
    const NvmlDevice handle = api_->device(gpu);
    const auto ask = [&](NvmlReturn (*call)(NvmlDevice, unsigned*)) {
        unsigned value = 0;
        return call && call(handle, &value) == kNvmlSuccess ? static_cast<int>(value) : 0;
    };
    return {ask(api_->pcie_width), ask(api_->max_pcie_width), ask(api_->pcie_generation),
            ask(api_->max_pcie_generation)};
}

long long Nvml::pcie_replays(const PciAddress& gpu) const {
    if (!available_) throw std::runtime_error(error_);
    const NvmlDevice handle = api_->device(gpu);
    unsigned replays = 0;
    return api_->pcie_replays && api_->pcie_replays(handle, &replays) == kNvmlSuccess ? static_cast<long long>(replays)
                                                                                      : -1;
}

Nvml::PowerLimits Nvml::power_limits(const PciAddress& gpu) const {
    if (!available_) throw std::runtime_error(error_);
    const NvmlDevice handle = api_->device(gpu);
    const auto watts = [&](NvmlReturn (*call)(NvmlDevice, unsigned*)) {
        unsigned milliwatts = 0;
        return call && call(handle, &milliwatts) == kNvmlSuccess ? milliwatts / 1000.0 : 0.0;
    };
    return {watts(api_->enforced_power_limit), watts(api_->default_power_limit)};
}

int Nvml::active_nvlinks(const PciAddress& gpu) const {
    if (!available_) throw std::runtime_error(error_);
    std::vector<unsigned> up;
    return api_->links_up(api_->device(gpu), up) ? static_cast<int>(up.size()) : -1;
}

bool Nvml::nvlinks_reach_switch(const PciAddress& gpu) const {
    if (!available_) throw std::runtime_error(error_);
    const NvmlDevice handle = api_->device(gpu);
    std::vector<unsigned> up;
    api_->links_up(handle, up);  // none where NVML cannot say
    return std::any_of(up.begin(), up.end(), [&](unsigned link) { return api_->link_to_switch(handle, link); });
}

unsigned long long Nvml::clock_event_reasons(const PciAddress& gpu) const {
    if (!available_) throw std::runtime_error(error_);
    if (!api_->clock_event_reasons) throw std::runtime_error("NVML lacks nvmlDeviceGetCurrentClocksEventReasons");
    unsigned long long reasons = 0;
    const NvmlReturn status = api_->clock_event_reasons(api_->device(gpu), &reasons);
    if (status != kNvmlSuccess) throw std::runtime_error("NVML: " + api_->describe(status));
    return reasons;
}

std::vector<std::string> Nvml::gpus_in_mig_mode() const {
    std::vector<std::string> found;
    unsigned count = 0;
    if (!available_ || !api_->count || !api_->handle_by_index || !api_->pci_info || !api_->mig_mode ||
        api_->count(&count) != kNvmlSuccess)
        return found;
    for (unsigned index = 0; index < count; ++index) {
        NvmlDevice handle = nullptr;
        PciInfo pci{};
        // One NVML cannot reach is left out.
        if (api_->handle_by_index(index, &handle) != kNvmlSuccess || !api_->mig_enabled(handle) ||
            api_->pci_info(handle, &pci) != kNvmlSuccess)
            continue;
        char bus_id[32];
        std::snprintf(bus_id, sizeof bus_id, "%04x:%02x:%02x.0", pci.domain, pci.bus, pci.device);
        found.push_back(bus_id);
    }
    return found;
}

bool Nvml::in_mig_mode(const PciAddress& gpu) const {
    if (!available_) return false;
    try {
        return api_->mig_enabled(api_->device(gpu));
    } catch (const std::runtime_error&) {  // a GPU NVML cannot find
        return false;
    }
}

std::vector<GpuProcess> Nvml::compute_processes(const PciAddress& gpu) const {
    if (!available_) throw std::runtime_error(error_);
    if (!api_->compute_processes)
        throw std::runtime_error("this driver's NVML lacks nvmlDeviceGetComputeRunningProcesses (_v2 or _v3)");
    const NvmlDevice handle = api_->device(gpu);
    NvmlReturn status = kNvmlSuccess;
    // A process may start between NVML's count and its list: the array then grows and the call is repeated.
    std::vector<ProcessInfo> infos(16);
    for (int attempt = 0; attempt < 4; ++attempt) {
        unsigned count = static_cast<unsigned>(infos.size());
        status = api_->compute_processes(handle, &count, infos.data());
        if (status == kNvmlSuccess) {
            std::vector<GpuProcess> processes;
            for (unsigned i = 0; i < count && i < infos.size(); ++i)
                processes.push_back({infos[i].pid, infos[i].used_gpu_memory == kNvmlValueNotAvailable
                                                       ? -1LL
                                                       : static_cast<long long>(infos[i].used_gpu_memory)});
            return processes;
        }
        if (status != kNvmlInsufficientSize)
            throw std::runtime_error("nvmlDeviceGetComputeRunningProcesses: " + api_->describe(status));
        infos.resize(size_t(count) + 16);
    }
    throw std::runtime_error("nvmlDeviceGetComputeRunningProcesses: the list kept growing");
}

}  // namespace fwi
