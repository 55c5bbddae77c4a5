// NVML, the NVIDIA Management Library that comes with the driver (libnvidia-ml.so.1): the only place that
// says how two GPUs are connected (NVLinks, or the PCIe path between them) and which processes use a GPU.
// doctor's devices and topology checks, visible_gpus --other-processes (other_processes.hpp) and the `links`
// of every RESULT's env (run_env.cpp) read it.
// Loaded at run time with dlopen, as NCCL does, so the suite builds where nvml.h is missing and runs where
// the library is: without it available() is false, doctor's topology matrix says "NVML not available" and
// everything else still runs.
#pragma once

#include <string>
#include <vector>

namespace fwi {

struct PciAddress {
    unsigned domain = 0, bus = 0, device = 0;
    std::string bus_id;  // "0000:18:00.0", as cudaDeviceGetPCIBusId writes it
};

// How two GPUs reach each other: NVLinks (direct, or through NVSwitches: the lower of the two GPUs'
// switch-link counts, as `nvidia-smi topo -m` shows them) and the PCIe path.
struct Link {
    int nvlinks = 0;
    std::string pcie;  // "PIX", "PXB", "PHB", "NODE", "SYS" (nvidia-smi's names), "" when unknown
};

// "NV18" when there are NVLinks, else the PCIe path, "?" when unknown.
std::string link_label(const Link& link);
// nvidia-smi's name of an NVML topology level (NVML_TOPOLOGY_SINGLE = 10 -> "PIX", ...).
std::string pcie_path_name(int nvml_topology_level);

// A GPU's PCIe link: lanes and generation now, and the most the GPU and its slot allow; 0 where NVML does
// not say (a VM may not).
struct PcieLink {
    int width = 0, max_width = 0;
    int generation = 0, max_generation = 0;
};

// A process with a compute context on a GPU, as NVML lists it.
struct GpuProcess {
    unsigned pid = 0;           // in the driver's view; a container may not see it
    long long used_bytes = -1;  // its GPU memory; -1 where NVML does not say
};

class Nvml {
public:
    Nvml();  // loads and initialises NVML; on failure available() is false and error() says why
    ~Nvml();
    Nvml(const Nvml&) = delete;
    Nvml& operator=(const Nvml&) = delete;

    bool available() const { return available_; }
    const std::string& error() const { return error_; }

    std::string driver_version() const;  // "580.82.07"; "" when unknown
    int gpu_count() const;               // every GPU the driver sees, whatever CUDA_VISIBLE_DEVICES says; -1 unknown

    // links[i * n + j] between GPUs i and j; throws std::runtime_error when NVML cannot find a GPU.
    std::vector<Link> links(const std::vector<PciAddress>& gpus) const;

    // The PCIe link of the GPU at `gpu`; throws std::runtime_error when NVML cannot find it.
    PcieLink pcie_link(const PciAddress& gpu) const;
    // How many packets the GPU's PCIe link has had to resend since the driver loaded (link errors: a marginal
    // riser, slot or cable), -1 where NVML cannot say (a VM may not); throws std::runtime_error when NVML cannot
    // find the GPU.
    long long pcie_replays(const PciAddress& gpu) const;
    // The GPU's power limit now (what `nvidia-smi -pl` or the board sets) and its default, in watts; 0 each
    // where NVML cannot say; throws std::runtime_error when NVML cannot find the GPU.
    struct PowerLimits {
        double enforced_w = 0.0, default_w = 0.0;
    };
    PowerLimits power_limits(const PciAddress& gpu) const;

    // Whether the driver lets the GPUs at `a` and `b` read each other's memory: peer access as
    // cudaDeviceCanAccessPeer reports it, for GPUs that CUDA_VISIBLE_DEVICES hides too (doctor --mpi's ranks may
    // see one GPU each); throws std::runtime_error when NVML cannot say.
    bool peer_readable(const PciAddress& a, const PciAddress& b) const;

    // How many of the GPU's NVLinks are up (0 for a GPU without NVLink), -1 when NVML cannot say; throws
    // std::runtime_error when NVML cannot find the GPU.
    int active_nvlinks(const PciAddress& gpu) const;

    // Whether any NVLink of the GPU that is up ends at an NVSwitch (false where NVML cannot say); throws
    // std::runtime_error when NVML cannot find the GPU.
    bool nvlinks_reach_switch(const PciAddress& gpu) const;

    // Why the GPU's clocks are below their most now, NVML's bit mask (nvmlClocksEventReasons: 0x1 idle, 0x4
    // software power cap, 0x8 hardware slowdown, 0x20 software thermal, 0x40 hardware thermal, 0x80 power
    // brake, ...); throws std::runtime_error when NVML cannot say (a driver without the call, a GPU it cannot
    // find).
    unsigned long long clock_event_reasons(const PciAddress& gpu) const;

    // The PCI addresses ("0000:41:00.0") of the GPUs the driver sees that are in MIG mode now, each split into
    // instances that CUDA sees as devices of their own; empty where none is, or NVML cannot say.
    std::vector<std::string> gpus_in_mig_mode() const;
    // Whether the GPU at `gpu` is in MIG mode now; false where it is not, or NVML cannot say.
    bool in_mig_mode(const PciAddress& gpu) const;

    // The processes with a compute context on the GPU at `gpu`, this one's included; throws
    // std::runtime_error when NVML cannot say (a driver without the call, a GPU it cannot find).
    std::vector<GpuProcess> compute_processes(const PciAddress& gpu) const;

private:
    struct Api;
    Api* api_ = nullptr;
    bool available_ = false;
    std::string error_;
};

}  // namespace fwi
