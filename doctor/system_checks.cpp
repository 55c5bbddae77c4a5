// Checks 1 (driver, runtime, devices and the build's code for them) and 2 (topology): queries only,
// nothing runs on the GPUs.
#include <cuda_runtime.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>

#include <strings.h>

#include "cuda_check.hpp"
#include "cuda_timing.hpp"
#include "device.hpp"
#include "errors.hpp"
#include "gpu_checks.hpp"
#include "gpu_resources.hpp"
#include "gpu_waits.hpp"
#include "launch_env.hpp"
#include "other_processes.hpp"
#include "output.hpp"
#include "run_env.hpp"

namespace fwi::doctor {

bool GpuSystem::every_pair_has_peer_access() const {
    if (can_access.size() != size_t(count) * count) return true;  // check 2 did not run: not known
    for (int i = 0; i < count; ++i)
        for (int j = 0; j < count; ++j)
            if (i != j && !peer(i, j)) return false;
    return true;
}

PeerPairs GpuSystem::peer_pairs() const {
    PeerPairs pairs;
    // No GPU visible: no pair, known without check 2.
    pairs.checked = count == 0 || (can_access.size() == size_t(count) * count && pci.size() == size_t(count));
    pairs.links_known = !links.empty();
    if (!pairs.checked) return pairs;
    const auto sysfs_address = [](std::string bus_id) {  // lower case, as sysfs names it
        for (char& c : bus_id) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        return bus_id;
    };
    for (int i = 0; i < count; ++i)
        for (int j = i + 1; j < count; ++j) {
            if (!links.empty() && links[size_t(i) * count + j].nvlinks > 0) continue;
            if (peer(i, j) || peer(j, i))
                pairs.pcie.push_back({sysfs_address(pci[i].bus_id), sysfs_address(pci[j].bus_id)});
            else
                ++pairs.without_access;
        }
    return pairs;
}

namespace {

Finding no_gpu_finding(const std::string& cuda_error, int driver, int runtime, const Variables& variables,
                       const Nvml& nvml) {
    NoGpuFacts facts;
    facts.cuda_error = cuda_error;
    facts.driver_version = driver;
    facts.runtime_version = runtime;
    facts.nvml_gpus = nvml.gpu_count();
    facts.gpus_in_mig_mode = int(nvml.gpus_in_mig_mode().size());
    facts.visible_devices_set = is_set(variables, "CUDA_VISIBLE_DEVICES");
    facts.visible_devices = value_of(variables, "CUDA_VISIBLE_DEVICES");
    facts.traces = read_driver_traces();
    return diagnose_no_gpu(facts);
}

std::string versions_line(int driver, int runtime, const Nvml& nvml) {
    const std::string module = nvml.driver_version();
    return "CUDA driver " + cuda_version_text(driver) + (module.empty() ? "" : " (driver " + module + ")") +
           ", CUDA runtime " + cuda_version_text(runtime);
}

}  // namespace

EnvironmentError gpu_not_opened(int device, cudaError_t status, const std::string& holders, int visible) {
    cudaGetLastError();
    char bus_id[32] = "?";
    cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, device);
    int mode = cudaComputeModeDefault;
    cudaDeviceGetAttribute(&mode, cudaDevAttrComputeMode, device);
    const std::string why = mode == cudaComputeModeExclusiveProcess
                                ? "its compute mode is exclusive-process, and another process holds it (" +
                                      (holders.empty() ? std::string("nvidia-smi lists it") : holders) + ")"
                            : mode == cudaComputeModeProhibited
                                ? "its compute mode is prohibited: no process may use it"
                                : "see `nvidia-smi` and `dmesg | grep -i xid`";
    const std::string others = visible > 1 ? "; to check the other GPUs meanwhile, name only them in "
                                             "CUDA_VISIBLE_DEVICES (by UUID: nvidia-smi -L shows each GPU's with its "
                                             "PCI bus id)"
                                           : "";
    return EnvironmentError("GPU " + std::to_string(device) + " (PCI " + bus_id +
                            ") is visible but cannot be opened (" + cudaGetErrorName(status) + "): " + why + others);
}

bool builds_machine_code_for(const std::string& architectures, int architecture) {
    std::stringstream list(architectures);
    std::string entry;
    while (std::getline(list, entry, ',')) {
        if (entry == "all" || entry == "all-major" || entry == "native") return true;  // nvcc's choice: not known here
        // "90", "90-real", "90a-real": machine code; "90-virtual": PTX only.
        const size_t digits = entry.find_first_not_of("0123456789");
        if (digits == 0 || entry.substr(0, digits) != std::to_string(architecture)) continue;
        if (entry.size() < 8 || entry.compare(entry.size() - 8, 8, "-virtual") != 0) return true;
    }
    return false;
}

std::string code_text(const BuildCode& code, const std::string& architectures) {
    if (!code.runs) return "no code of this build it can run (" + code.load_error + ")";
    const std::string ptx = "compute_" + std::to_string(code.ptx_version) + " PTX";
    const std::string gpu = "sm_" + std::to_string(code.binary_version);
    if (code.ptx_version != code.binary_version) return "runs " + ptx + " compiled for " + gpu;
    // The same architecture from PTX or from machine code: the build's list tells them apart.
    if (builds_machine_code_for(architectures, code.binary_version)) return "runs " + gpu + " code";
    return "runs " + ptx + ", compiled for " + gpu + " when a program loads";
}

Finding build_code_verdict(const std::vector<GpuCode>& gpus, const std::string& architectures) {
    std::string without_code, older_ptx;
    for (const GpuCode& gpu : gpus) {
        const std::string name =
            "GPU " + std::to_string(gpu.device) + " (sm_" + std::to_string(gpu.compute_capability) + ")";
        if (!gpu.code.runs)
            without_code += (without_code.empty() ? "" : ", ") + name + ": " + gpu.code.load_error;
        else if (gpu.compute_capability >= 90 && !has_programmatic_wait(gpu.code))
            older_ptx += (older_ptx.empty() ? "" : ", ") + name + " runs compute_" +
                         std::to_string(gpu.code.ptx_version) + " PTX";
    }
    Finding verdict;
    if (!without_code.empty()) {
        verdict.status = Status::fail;
        verdict.summary = "this build (CUDA architectures " + architectures + ") has no code these GPUs can run (" +
                          without_code + "): every program stops at its first kernel";
        verdict.next = kRebuildForTheseGpus;
    } else if (!older_ptx.empty()) {
        verdict.status = Status::warn;
        verdict.summary = "this build (CUDA architectures " + architectures +
                          ") has no code of 9.0 or later that these GPUs can run: " + older_ptx +
                          ", which the driver compiles when a program loads, and the propagator steps without "
                          "programmatic launch (slower)";
        verdict.next = kRebuildForTheseGpus;
    }
    return verdict;
}

Finding driver_verdict(int driver, int runtime, const std::vector<GpuCode>& gpus) {
    Finding verdict;
    if (driver <= 0 || driver >= runtime) return verdict;
    const bool loses_programmatic_launch =
        driver < 12030 && std::any_of(gpus.begin(), gpus.end(), [](const GpuCode& gpu) {
            return gpu.compute_capability >= 90 && has_programmatic_wait(gpu.code);
        });
    verdict.status = Status::warn;
    verdict.summary =
        "the driver supports CUDA " + cuda_version_text(driver) + ", older than the runtime of this build (" +
        cuda_version_text(runtime) + "): programs run, but a CUDA call newer than the driver fails" +
        (loses_programmatic_launch ? ", and the propagator steps without programmatic launch (slower; it needs 12.3)"
                                   : "");
    verdict.next = older_driver_advice(driver, runtime);
    return verdict;
}

namespace {
// A GPU's PCIe link, all unknown (0) where NVML is missing or cannot find the GPU.
PcieLink pcie_link_of(const Nvml& nvml, const PciAddress& gpu) {
    if (!nvml.available()) return {};
    try {
        return nvml.pcie_link(gpu);
    } catch (const std::runtime_error&) {
        return {};
    }
}

// A GPU's PCIe replay counter, -1 where NVML is missing, cannot find the GPU or cannot say.
long long pcie_replays_of(const Nvml& nvml, const PciAddress& gpu) {
    if (!nvml.available()) return -1;
    try {
        return nvml.pcie_replays(gpu);
    } catch (const std::runtime_error&) {
        return -1;
    }
}

// Copies `host` (pinned) to GPU `device` a few times, reading the link's generation and width until they are
// done and keeping the highest: a GPU at rest lowers its PCIe generation to save power (some laptop and
// desktop GPUs their width too) and trains it up once copies run, so only a loaded link says what the slot
// gives. The link's replay counter is read before and after.
// About 10 ms a GPU; not measured (HostCopy's zeros) where the GPU has no memory for the buffer.
HostCopy measure_host_copy(int device, const Nvml& nvml, const PciAddress& gpu, const PinnedBuffer<char>& host,
                           const Deadline& deadline) {
    constexpr int kCopies = 8;
    HostCopy copy;
    const long long replays_before = pcie_replays_of(nvml, gpu);
    try {
        DeviceBuffer<char> target(device, host.size());
        const CudaStream stream(device);
        const CudaEvent start(device, CudaEvent::Timing::on), stop(device, CudaEvent::Timing::on);
        const auto enqueue = [&] {
            CUDA_CHECK(cudaMemcpyAsync(target.data(), host.data(), host.bytes(), cudaMemcpyHostToDevice, stream.get()));
        };
        enqueue();  // the first copy of a buffer pays for setting it up
        CUDA_CHECK(cudaEventRecord(start.get(), stream.get()));
        for (int i = 0; i < kCopies; ++i) enqueue();
        CUDA_CHECK(cudaEventRecord(stop.get(), stream.get()));
        do {  // read at least once while the copies run; wait_for_event then has the deadline and the errors
            const PcieLink now = pcie_link_of(nvml, gpu);
            copy.generation_under_load = std::max(copy.generation_under_load, now.generation);
            copy.width_under_load = std::max(copy.width_under_load, now.width);
        } while (cudaEventQuery(stop.get()) == cudaErrorNotReady && !deadline.passed());
        wait_for_event(stop.get(), deadline, "copies from the host to GPU " + std::to_string(device));
        copy.gbps = kCopies * double(host.bytes()) / elapsed_seconds(start, stop) / 1e9;
    } catch (const DeviceMemoryError&) {
        return {};
    }
    const long long replays_after = pcie_replays_of(nvml, gpu);
    if (replays_before >= 0 && replays_after >= replays_before) copy.replays = replays_after - replays_before;
    return copy;
}

// "GPU 0: copies from pinned host memory 55.3 GB/s, PCIe Gen5 x16 under load (the most: Gen5 x16), 0 link
// replays".
std::string host_copy_line(int device, const HostCopy& copy, const PcieLink& link) {
    char line[160];
    std::snprintf(line, sizeof line, "GPU %d: copies from pinned host memory %.1f GB/s", device, copy.gbps);
    std::string text = line;
    if (link.width > 0 && copy.generation_under_load > 0)
        text += ", PCIe Gen" + std::to_string(copy.generation_under_load) + " x" + std::to_string(link.width) +
                " under load (the most: Gen" + std::to_string(link.max_generation) + " x" +
                std::to_string(link.max_width) + ")";
    if (copy.replays >= 0) text += ", " + std::to_string(copy.replays) + " link replays";
    return text;
}
}  // namespace

double pcie_link_gbps(int generation, int width) {
    // GB/s a lane carries a direction: the transfer rate after 8b/10b (Gen1, 2), 128b/130b (Gen3-5) or
    // Gen6's flits.
    static const double kLaneGbps[] = {0.0, 0.25, 0.5, 0.985, 1.969, 3.938, 7.563};
    if (generation < 1 || generation > 6 || width < 1) return 0.0;
    return kLaneGbps[generation] * width;
}

PcieLink link_under_load(PcieLink at_rest, const HostCopy& copy) {
    if (copy.generation_under_load > 0) at_rest.generation = copy.generation_under_load;
    at_rest.width = std::max(at_rest.width, copy.width_under_load);
    return at_rest;
}

Finding pcie_link_verdict(const std::vector<PcieLink>& links, const std::vector<HostCopy>& copies) {
    Finding verdict;
    std::string narrow, slow, slow_copies, resent;
    for (size_t device = 0; device < links.size(); ++device) {
        const PcieLink& link = links[device];
        const HostCopy copy = device < copies.size() ? copies[device] : HostCopy{};
        if (copy.replays > 0)
            resent +=
                (resent.empty() ? "GPU " : ", GPU ") + std::to_string(device) + ": " + std::to_string(copy.replays);
        const bool loaded = copy.generation_under_load > 0;
        const double carries = loaded ? pcie_link_gbps(link.generation, link.width) : 0.0;
        if (carries > 0.0 && copy.gbps > 0.0 && copy.gbps < 0.5 * carries) {
            char text[96];
            std::snprintf(text, sizeof text, "GPU %zu %.1f of %.1f GB/s", device, copy.gbps, carries);
            slow_copies += (slow_copies.empty() ? "" : ", ") + std::string(text);
        }
        if (link.width > 0 && link.max_width > link.width)
            narrow += (narrow.empty() ? "GPU " : ", GPU ") + std::to_string(device) + " x" +
                      std::to_string(link.width) + " of x" + std::to_string(link.max_width);
        if (loaded && link.generation > 0 && link.max_generation > link.generation)
            slow += (slow.empty() ? "GPU " : ", GPU ") + std::to_string(device) + " Gen" +
                    std::to_string(link.generation) + " of Gen" + std::to_string(link.max_generation);
    }
    if (narrow.empty() && slow.empty() && slow_copies.empty() && resent.empty()) return verdict;
    verdict.status = Status::warn;
    std::vector<std::string> problems;
    if (!narrow.empty()) problems.push_back("PCIe links with fewer lanes than they can have (" + narrow + ")");
    if (!slow.empty())
        problems.push_back("PCIe links at a lower generation under load than they can have (" + slow + ")");
    if (!problems.empty())
        problems.back() += ": copies to and from the host, and between GPUs without NVLink, are as much slower";
    if (!slow_copies.empty())
        problems.push_back("copies from pinned host memory under half of what the PCIe link carries (" + slow_copies +
                           ")");
    if (!resent.empty())
        problems.push_back("PCIe links that resent packets during check 1's copies (" + resent +
                           "; a healthy link resends none): link errors, which slow every transfer over the link");
    verdict.summary = join(problems, "; ");
    verdict.next =
        "reseat the card, and check its riser and the BIOS's lane and PCIe generation settings; "
        "`nvidia-smi -q -d PCIE` shows each link and its replay counter" +
        std::string(slow_copies.empty() ? ""
                                        : "; for slow copies on a full link without replays, the host memory's NUMA "
                                          "node against the GPU's (`nvidia-smi topo -m`)");
    return verdict;
}

Finding clock_slowdown_verdict(const std::vector<std::pair<int, unsigned long long>>& reasons) {
    static const std::pair<unsigned long long, const char*> kSlowdowns[] = {{0x8, "hardware slowdown"},
                                                                            {0x20, "driver's thermal slowdown"},
                                                                            {0x40, "hardware thermal slowdown"},
                                                                            {0x80, "power brake"}};
    Finding verdict;
    std::string slowed;
    for (const auto& [device, mask] : reasons) {
        std::string causes;
        for (const auto& [bit, name] : kSlowdowns)
            if (mask & bit) causes += std::string(causes.empty() ? "" : ", ") + name;
        if (!causes.empty()) slowed += (slowed.empty() ? "GPU " : "; GPU ") + std::to_string(device) + ": " + causes;
    }
    if (slowed.empty()) return verdict;
    verdict.status = Status::warn;
    verdict.summary = "clocks lowered by " + slowed + ": a slowed GPU sets the pace of every collective";
    verdict.next = "check cooling and power: `nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER`";
    return verdict;
}

Finding power_limit_verdict(const std::vector<std::pair<int, Nvml::PowerLimits>>& limits) {
    Finding verdict;
    std::vector<std::string> lowered;
    for (const auto& [device, limit] : limits)
        if (limit.enforced_w > 0.0 && limit.default_w > 0.0 && limit.enforced_w < 0.9 * limit.default_w)
            lowered.push_back("GPU " + std::to_string(device) + " to " + format_number(limit.enforced_w) +
                              " W of its default " + format_number(limit.default_w) + " W");
    if (lowered.empty()) return verdict;
    verdict.status = Status::warn;
    verdict.summary = "power limit lowered: " + join(lowered, ", ") +
                      ": a GPU held below its default computes slower at its limit, and sets the pace of every "
                      "collective";
    verdict.next =
        "`nvidia-smi -q -d POWER` shows the limits; where the cap is not the site's choice, an administrator "
        "restores the default with `nvidia-smi -i <GPU> -pl <watts>`";
    return verdict;
}

Finding mig_mode_verdict(const std::vector<std::string>& in_mig_mode, const std::vector<PciAddress>& visible) {
    Finding verdict;
    // Nvml::gpus_in_mig_mode writes the address in lower case, cudaDeviceGetPCIBusId in upper case.
    std::vector<std::string> gpus_in_mig_mode, others;
    for (const std::string& bus_id : in_mig_mode) {
        const bool seen = std::any_of(visible.begin(), visible.end(), [&](const PciAddress& gpu) {
            return strcasecmp(gpu.bus_id.c_str(), bus_id.c_str()) == 0;
        });
        (seen ? gpus_in_mig_mode : others).push_back(bus_id);
    }
    if (!others.empty())
        verdict.details.push_back("in MIG mode, and not among the GPUs this process sees (not judged): " +
                                  join(others, ", "));
    if (gpus_in_mig_mode.empty()) return verdict;
    verdict.status = Status::warn;
    verdict.summary = std::string(gpus_in_mig_mode.size() == 1 ? "the GPU at " : "the GPUs at ") +
                      join(gpus_in_mig_mode, ", ") + (gpus_in_mig_mode.size() == 1 ? " is" : " are") +
                      " in MIG mode: CUDA sees instances, with neither peer access nor NCCL between them";
    verdict.next =
        "the multi-GPU programs need whole GPUs: pick GPUs without MIG (CUDA_VISIBLE_DEVICES, the job's "
        "GPU request), or have an administrator turn MIG off (`nvidia-smi -i <GPU> -mig 0`)";
    return verdict;
}

Finding nvlink_count_verdict(const std::vector<std::string>& names, const std::vector<int>& active,
                             const std::vector<bool>& reaches_switch) {
    const size_t n = std::min({names.size(), active.size(), reaches_switch.size()});
    std::map<std::string, int> most;        // per model
    std::set<std::string> switched_models;  // whose GPUs reach an NVSwitch
    for (size_t gpu = 0; gpu < n; ++gpu) {
        most[names[gpu]] = std::max(most[names[gpu]], active[gpu]);
        if (reaches_switch[gpu]) switched_models.insert(names[gpu]);
    }
    Finding verdict;
    std::string fewer;
    for (size_t gpu = 0; gpu < n; ++gpu)
        if ((active[gpu] > 0 || (active[gpu] == 0 && switched_models.count(names[gpu]))) &&
            active[gpu] < most[names[gpu]])
            fewer += (fewer.empty() ? "GPU " : ", GPU ") + std::to_string(gpu) + " " + std::to_string(active[gpu]) +
                     " of " + std::to_string(most[names[gpu]]);
    if (fewer.empty()) return verdict;
    verdict.status = Status::warn;
    verdict.summary = "NVLinks down: fewer are up than on another GPU of the same model (" + fewer +
                      "); the pairs through them have less bandwidth, and NCCL's rings slow down to it";
    verdict.next =
        "`nvidia-smi nvlink -s` (each link's state) and `nvidia-smi nvlink -e` (errors); a link that stays "
        "down needs the system's service";
    return verdict;
}

Finding other_processes_verdict(const OtherProcesses& others) {
    Finding verdict;
    verdict.details = other_process_lines(others);
    if (!others.unknown.empty()) verdict.details.push_back("other processes: " + others.unknown);
    const int processes = others.process_count(), gpus = others.gpu_count();
    if (processes == 0) return verdict;
    verdict.status = Status::warn;
    verdict.summary = std::to_string(processes) + " other process" + (processes > 1 ? "es" : "") + " on " +
                      std::to_string(gpus) + " of the GPUs, sharing them";
    verdict.next =
        "if they compute, whatever runs beside them is slower and varies (doctor's figures, the lessons, the "
        "comparison): let them finish or stop them (`nvidia-smi` lists them), or choose idle GPUs with "
        "CUDA_VISIBLE_DEVICES";
    return verdict;
}

// The process's name is under "process", not "name": run_doctor_test.sh counts the GPU models by the "name"
// values of doctor's JSON.
JsonObject other_processes_json(const OtherProcesses& others) {
    std::vector<JsonObject> named, unnamed;
    for (const OtherProcess& other : others.named)
        named.push_back(JsonObject()
                            .add("gpu", other.gpu)
                            .add("pid", static_cast<long long>(other.pid))
                            .add("process", other.name)
                            .add("used_bytes", other.used_bytes));
    for (const UnnamedProcesses& group : others.unnamed)
        unnamed.push_back(JsonObject().add("gpu", group.gpu).add("processes", group.count));
    return JsonObject()
        .add("named", named)
        .add("unnamed", unnamed)
        .add("hidden_on_gpus", others.hidden)
        .add("unknown", others.unknown.empty() ? JsonValue(nullptr) : JsonValue(others.unknown));
}

namespace {
// "pid 123 (python3), pid 456" for a GPU in exclusive-process mode that cannot be opened: the process that
// holds it, as NVML lists it; "" in another mode, or where NVML cannot say.
std::string holders_of(int device, const Nvml& nvml, const std::vector<unsigned>& own_processes) {
    std::string holders;
    try {
        if (!gpu_takes_one_process(device)) return "";
        for (const OtherProcess& other :
             find_other_processes(nvml, {gpu_pci_address(device)}, own_processes, false).named)
            holders += (holders.empty() ? "" : ", ") + std::string("pid ") + std::to_string(other.pid) +
                       (other.name.empty() ? "" : " (" + other.name + ")");
    } catch (const std::exception&) {  // the GPU's mode, address or list could not be read: not named, then
    }
    return holders;
}
}  // namespace

Finding diagnose_no_gpu_here(const Variables& variables, const Nvml& nvml) {
    int driver = 0, runtime = 0, count = 0;
    cudaDriverGetVersion(&driver);  // 0 (and success) when libcuda.so.1 is missing
    cudaRuntimeGetVersion(&runtime);
    const cudaError_t status = cudaGetDeviceCount(&count);
    cudaGetLastError();  // a failed count leaves a sticky-looking error behind; clear it
    if (status == cudaSuccess && count > 0) return Finding{};
    return no_gpu_finding(cudaGetErrorName(status == cudaSuccess ? cudaErrorNoDevice : status), driver, runtime,
                          variables, nvml);
}

namespace {

// A problem `also` found (not PASS) joins `finding`: its status where the finding passed, its summary and
// its advice after the finding's (or alone, where the finding has none yet).
void add_problem(Finding& finding, const Finding& also) {
    if (also.status == Status::pass) return;
    if (finding.status == Status::pass) finding.status = also.status;
    finding.summary += (finding.summary.empty() ? "" : "; ") + also.summary;
    finding.next += (finding.next.empty() ? "" : "; and ") + also.next;
}

}  // namespace

Finding check_devices(const Variables& variables, const Nvml& nvml, const std::vector<unsigned>& own_processes,
                      GpuSystem& system, const Deadline& deadline) {
    Finding finding = diagnose_no_gpu_here(variables, nvml);
    int driver = 0, runtime = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    const int count = visible_gpu_count();
    finding.id = "devices";
    finding.facts.add("environment", environment_json(variables));
    if (finding.status == Status::fail) {
        for (const auto& line : environment_lines(variables)) finding.details.push_back("environment: " + line);
        system.count = 0;
        return finding;
    }

    std::map<std::string, int> models;
    std::vector<GpuCode> codes;
    std::vector<PcieLink> pcie_links;
    std::vector<HostCopy> host_copies;                     // check 1's copies from the host to each GPU
    std::unique_ptr<PinnedBuffer<char>> host_copy_source;  // made once the first GPU is open (it needs a context)
    bool host_copy_source_tried = false;
    std::vector<std::pair<int, unsigned long long>> clock_reasons;
    std::vector<std::pair<int, Nvml::PowerLimits>> power_limits;
    JsonObject devices;
    for (int device = 0; device < count; ++device) {
        // Create the GPU's context now, under this check's watchdog: a GPU in a bad state often hangs or
        // fails right here, and the later checks' deadlines then time GPU work only.
        // Since CUDA 12 cudaSetDevice itself creates the context, so either call may be the one that fails.
        cudaError_t opened = cudaSetDevice(device);
        if (opened == cudaSuccess) system.opened = device + 1;  // a context, even where cudaFree then fails
        if (opened == cudaSuccess) opened = cudaFree(nullptr);
        if (opened != cudaSuccess) throw gpu_not_opened(device, opened, holders_of(device, nvml, own_processes), count);
        cudaDeviceProp properties{};
        CUDA_CHECK(cudaGetDeviceProperties(&properties, device));
        system.names.push_back(properties.name);
        system.pci.push_back(gpu_pci_address(device));
        ++models[properties.name];
        const GpuCode gpu{device, properties.major * 10 + properties.minor, build_code_for(device)};
        codes.push_back(gpu);
        finding.details.push_back("GPU " + std::to_string(device) + ": " + describe_device(device) + ", PCI " +
                                  system.pci.back().bus_id + ", " + code_text(gpu.code, build_cuda_architectures()));
        pcie_links.push_back(pcie_link_of(nvml, system.pci.back()));
        if (!host_copy_source_tried) try {
                host_copy_source_tried = true;
                host_copy_source = std::make_unique<PinnedBuffer<char>>(size_t(64) << 20);
            } catch (const EnvironmentError&) {  // no page-locked memory to be had: not measured on any GPU
                cudaGetLastError();
            }
        // Only with time to spare: copies queued after the GPUs' set-up took most of the check's time would
        // end past its deadline and be reported as a GPU that hangs.
        constexpr double kHostCopySeconds = 2.0;
        const bool time_for_copies = deadline.remaining() > kHostCopySeconds;
        if (host_copy_source && !time_for_copies)
            finding.details.push_back("GPU " + std::to_string(device) +
                                      ": copies from the host not measured: under 2 s of the check's time left "
                                      "(--timeout)");
        const HostCopy host_copy = host_copy_source && time_for_copies
                                       ? measure_host_copy(device, nvml, system.pci.back(), *host_copy_source, deadline)
                                       : HostCopy{};
        host_copies.push_back(host_copy);
        pcie_links.back() = link_under_load(pcie_links.back(), host_copy);
        if (host_copy.gbps > 0) finding.details.push_back(host_copy_line(device, host_copy, pcie_links.back()));
        long long reasons = -1;  // unknown
        if (nvml.available()) {
            try {
                reasons = static_cast<long long>(nvml.clock_event_reasons(system.pci.back()));
                clock_reasons.emplace_back(device, static_cast<unsigned long long>(reasons));
            } catch (const std::runtime_error&) {
            }
            try {
                power_limits.emplace_back(device, nvml.power_limits(system.pci.back()));
            } catch (const std::runtime_error&) {
            }
        }
        const PcieLink& pcie = pcie_links.back();
        JsonObject json;
        json.add("name", properties.name)
            .add("compute_capability", std::to_string(properties.major) + "." + std::to_string(properties.minor))
            .add("multiprocessors", properties.multiProcessorCount)
            .add("memory_bytes", properties.totalGlobalMem)
            .add("pci_bus_id", system.pci.back().bus_id)
            .add("build_code", code_text(gpu.code, build_cuda_architectures()))
            .add("pcie",
                 JsonObject()
                     .add("width", pcie.width)
                     .add("max_width", pcie.max_width)
                     .add("generation", pcie.generation)
                     .add("generation_under_load", host_copy.generation_under_load > 0)
                     .add("max_generation", pcie.max_generation)
                     .add("host_to_gpu_GBps", host_copy.gbps > 0 ? std::optional<double>(host_copy.gbps) : std::nullopt)
                     .add("replays_during_copies",
                          host_copy.replays >= 0 ? std::optional<long long>(host_copy.replays) : std::nullopt))
            .add("clock_event_reasons", reasons);
        devices.add(std::to_string(device), json);
    }
    system.count = count;  // only now: the later checks index names and pci by it
    finding.details.push_back(versions_line(driver, runtime, nvml));
    const int nvml_gpus = nvml.gpu_count();
    const std::vector<std::string> gpus_in_mig_mode = nvml.gpus_in_mig_mode();
    const Finding mig_mode = mig_mode_verdict(gpus_in_mig_mode, system.pci);
    finding.details.insert(finding.details.end(), mig_mode.details.begin(), mig_mode.details.end());
    if (nvml_gpus > count)
        finding.details.push_back(
            "the driver sees " + std::to_string(nvml_gpus) + " GPUs, CUDA " + std::to_string(count) +
            (is_set(variables, "CUDA_VISIBLE_DEVICES")
                 ? ": " + visible_devices_text(count, value_of(variables, "CUDA_VISIBLE_DEVICES"))
                 : " without CUDA_VISIBLE_DEVICES: a GPU in MIG mode, one CUDA cannot use, or the container's or job's "
                   "device rules hide the others"));
    // doctor holds a context on every visible GPU by now, so it must be in each GPU's list.
    const OtherProcesses others = find_other_processes(nvml, system.pci, own_processes, true);
    const Finding shared = other_processes_verdict(others);
    finding.details.insert(finding.details.end(), shared.details.begin(), shared.details.end());
    for (const auto& line : environment_lines(variables)) finding.details.push_back("environment: " + line);
    finding.facts.add("other_processes", other_processes_json(others));
    finding.facts.add("driver_version", driver)
        .add("runtime_version", runtime)
        .add("driver", nvml.driver_version())
        .add("nvml_gpus", nvml_gpus)
        .add("gpus_in_mig_mode", gpus_in_mig_mode)
        .add("devices", devices);

    std::string model_list;
    for (const auto& [name, how_many] : models)
        model_list += (model_list.empty() ? "" : ", ") + std::to_string(how_many) + "x " + name;
    finding.summary = count_of(count, "GPU") + " (" + model_list + "); " + versions_line(driver, runtime, nvml);
    finding.facts.add("cuda_architectures", build_cuda_architectures());
    const Finding build = build_code_verdict(codes, build_cuda_architectures());
    const Finding old_driver = driver_verdict(driver, runtime, codes);
    if (build.status != Status::pass) {
        finding.status = build.status;
        finding.summary += "; " + build.summary;
        finding.next = build.next;
        if (old_driver.status != Status::pass) {  // both are worth fixing: the build first
            finding.summary += "; " + old_driver.summary;
            finding.next += "; then " + old_driver.next;
        }
    } else if (old_driver.status != Status::pass) {
        finding.status = old_driver.status;
        finding.summary += "; " + old_driver.summary;
        finding.next = old_driver.next;
    } else if (value_of(variables, "CUDA_LAUNCH_BLOCKING") == "1") {
        finding.status = Status::warn;
        finding.summary += "; CUDA_LAUNCH_BLOCKING=1 serialises every launch";
        finding.next = "unset CUDA_LAUNCH_BLOCKING: it is for debugging and makes every timing meaningless";
    } else if (models.size() > 1) {
        finding.status = Status::warn;
        finding.summary += "; the GPUs differ, so the slowest sets the pace of every collective";
        finding.next =
            "pick identical GPUs with CUDA_VISIBLE_DEVICES (CUDA numbers the fastest first unless "
            "CUDA_DEVICE_ORDER=PCI_BUS_ID, which numbers them as nvidia-smi does; their UUIDs, from nvidia-smi -L, "
            "name them either way)";
    }
    // Narrow links and other processes are worth knowing whatever else check 1 found, and what to do about
    // them differs.
    for (const Finding& also : {pcie_link_verdict(pcie_links, host_copies), clock_slowdown_verdict(clock_reasons),
                                power_limit_verdict(power_limits), shared, mig_mode})
        add_problem(finding, also);
    return finding;
}

Finding check_gpu_health(const Nvml& nvml, int device, const std::vector<unsigned>& own_processes) {
    Finding finding;
    if (!nvml.available()) {
        finding.status = Status::skip;
        const std::string why = "NVML not available (" + nvml.error() + ")";
        finding.summary = why + ": its clocks, power limit and other processes not examined";
        return finding;
    }
    const PciAddress gpu = gpu_pci_address(device);
    std::vector<std::pair<int, unsigned long long>> clock_reasons;
    std::vector<std::pair<int, Nvml::PowerLimits>> power_limits;
    try {
        clock_reasons.emplace_back(device, nvml.clock_event_reasons(gpu));
    } catch (const std::runtime_error& error) {  // NVML cannot find or read the GPU: nothing judged
        finding.status = Status::skip;
        finding.summary = std::string("NVML could not read its clocks (") + error.what() + ")";
        return finding;
    }
    try {
        power_limits.emplace_back(device, nvml.power_limits(gpu));
    } catch (const std::runtime_error&) {  // not every GPU reports its limits (check 1 goes on without them too)
    }
    // Its PCIe link is not judged: some GPUs narrow an idle link, and only check 1's copies from the host
    // show the width under load.
    OtherProcesses others = find_other_processes(nvml, {gpu}, own_processes, true);
    for (OtherProcess& process : others.named) process.gpu = device;  // the verdicts name it by its ordinal
    for (UnnamedProcesses& unnamed : others.unnamed) unnamed.gpu = device;
    for (int& hidden : others.hidden) hidden = device;
    Finding shared = other_processes_verdict(others);
    if (shared.status != Status::pass) shared.summary += " (" + join(shared.details, "; ") + ")";
    for (const Finding& also : {clock_slowdown_verdict(clock_reasons), power_limit_verdict(power_limits), shared})
        add_problem(finding, also);
    return finding;
}

namespace {

int p2p_attribute(cudaDeviceP2PAttr attribute, int i, int j) {
    int value = 0;
    CUDA_CHECK(cudaDeviceGetP2PAttribute(&value, attribute, i, j));
    return value;
}

std::string pair_text(int i, int j) { return std::to_string(i) + "-" + std::to_string(j); }

}  // namespace

Finding check_topology(const Nvml& nvml, GpuSystem& system) {
    const int n = system.count;
    system.can_access.assign(size_t(n) * n, 0);
    if (n < 2) return skipped("topology", "one GPU visible: no pairs to check");

    Finding finding;
    finding.id = "topology";
    std::vector<int> rank(size_t(n) * n, 0), atomics(size_t(n) * n, 0), supported(size_t(n) * n, 0);
    for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j) {
            if (i == j) continue;
            int can = 0;
            CUDA_CHECK(cudaDeviceCanAccessPeer(&can, i, j));
            const size_t at = size_t(i) * n + j;
            system.can_access[at] = static_cast<char>(can);
            supported[at] = p2p_attribute(cudaDevP2PAttrAccessSupported, i, j);
            rank[at] = p2p_attribute(cudaDevP2PAttrPerformanceRank, i, j);
            atomics[at] = p2p_attribute(cudaDevP2PAttrNativeAtomicSupported, i, j);
        }
    system.performance_rank = rank;

    std::string nvml_problem;
    try {
        system.links = nvml.links(system.pci);
    } catch (const std::exception& e) {
        nvml_problem = e.what();
        system.links.clear();
    }
    const auto link_at = [&](int i, int j) {
        return system.links.empty() ? std::string("-") : link_label(system.links[size_t(i) * n + j]);
    };

    finding.details.push_back(system.links.empty()
                                  ? "links: " + nvml_problem
                                  : "links (NVML; NV# = NVLinks, else the PCIe path: PIX one switch, PXB several, PHB "
                                    "host bridge, NODE/SYS across bridges or CPU sockets):");
    if (!system.links.empty())
        for (const auto& line : format_matrix(n, "", 7, [&](int i, int j) { return i == j ? "X" : link_at(i, j); }))
            finding.details.push_back(line);
    std::vector<int> active_nvlinks(n, -1);  // unknown
    std::vector<bool> reaches_switch(n, false);
    if (!system.links.empty()) {
        std::string line;
        for (int gpu = 0; gpu < n; ++gpu) {
            try {
                active_nvlinks[gpu] = nvml.active_nvlinks(system.pci[gpu]);
                reaches_switch[gpu] = nvml.nvlinks_reach_switch(system.pci[gpu]);
            } catch (const std::runtime_error&) {
            }
            line +=
                (gpu ? ", " : "") + (active_nvlinks[gpu] < 0 ? std::string("?") : std::to_string(active_nvlinks[gpu]));
        }
        finding.details.push_back("NVLinks up, GPU 0 to " + std::to_string(n - 1) + ": " + line);
    }
    finding.details.push_back("peer access (CUDA): performance rank, lower is better; +atom = native atomics");
    for (const auto& line : format_matrix(n, "", 10, [&](int i, int j) -> std::string {
             if (i == j) return "X";
             const size_t at = size_t(i) * n + j;
             if (!system.can_access[at]) return "none";
             return "r" + std::to_string(rank[at]) + (atomics[at] ? "+atom" : "");
         }))
        finding.details.push_back(line);

    std::string without_access, nvlink_without_access, inconsistent;
    for (int i = 0; i < n; ++i)
        for (int j = i + 1; j < n; ++j) {
            const bool both = system.peer(i, j) && system.peer(j, i);
            if (!both) without_access += (without_access.empty() ? "" : ", ") + pair_text(i, j);
            if (!both && !system.links.empty() && system.links[size_t(i) * n + j].nvlinks > 0)
                nvlink_without_access += (nvlink_without_access.empty() ? "" : ", ") + pair_text(i, j);
            if (supported[size_t(i) * n + j] != system.can_access[size_t(i) * n + j])
                inconsistent += (inconsistent.empty() ? "" : ", ") + pair_text(i, j);
        }
    if (!nvlink_without_access.empty()) {
        finding.status = Status::fail;
        finding.summary = "NVLink but no peer access between GPUs " + nvlink_without_access;
        finding.next =
            "in a VM the hypervisor must pass P2P through; on NVSwitch machines look for an NVLink fault or a fabric "
            "partition (nvidia-smi nvlink -s; nvidia-smi -q | grep -i -A2 fabric); `nvidia-smi topo -p2p r` shows the "
            "driver's view";
    } else if (!without_access.empty()) {
        finding.status = Status::warn;
        finding.summary =
            "no peer access between GPUs " + without_access + ": copies between them go through host memory (slower)";
        finding.next =
            "normal for GPUs on different CPU sockets or consumer GPUs, and in most VMs (only the hypervisor can pass "
            "peer access through: ask its administrator); otherwise see the driver's view in `nvidia-smi topo -p2p "
            "r`: a translating IOMMU (check 6 prints its mode; iommu=pt lets peers talk) or ACS on the PCIe switches "
            "(`lspci -vvv | grep -i acsctl`) makes it refuse peer access";
    } else {
        std::map<std::string, int> kinds;
        for (int i = 0; i < n; ++i)
            for (int j = 0; j < n; ++j)
                if (i != j) ++kinds[link_at(i, j)];
        std::string kind_list;
        for (const auto& [label, pairs] : kinds) kind_list += (kind_list.empty() ? "" : ", ") + label;
        finding.summary = "peer access between every pair; links: " +
                          (system.links.empty() ? "unknown (" + nvml_problem + ")" : kind_list);
    }
    if (const Finding links_down = nvlink_count_verdict(system.names, active_nvlinks, reaches_switch);
        links_down.status != Status::pass) {
        if (finding.status == Status::pass) {
            finding.status = links_down.status;
            finding.next = links_down.next;
        }
        finding.summary += "; " + links_down.summary;
    }
    if (!inconsistent.empty()) {
        if (finding.status == Status::pass) finding.status = Status::warn;
        finding.details.push_back("cudaDevP2PAttrAccessSupported disagrees with cudaDeviceCanAccessPeer for " +
                                  inconsistent);
    }
    finding.facts.add("nvml", nvml_problem.empty() ? std::string("available") : nvml_problem)
        .add("links", matrix_json(n, false, link_at))
        .add("peer_access", matrix_json(n, false, [&](int i, int j) { return system.peer(i, j); }))
        .add("performance_rank", matrix_json(n, false, [&](int i, int j) { return rank[size_t(i) * n + j]; }))
        .add("native_atomics", matrix_json(n, false, [&](int i, int j) { return atomics[size_t(i) * n + j] != 0; }))
        .add("active_nvlinks", active_nvlinks);
    return finding;
}

std::string gpus_refusing_work(const GpuSystem& system) {
    std::vector<std::string> refusing;
    int current = 0;
    const bool restore = cudaGetDevice(&current) == cudaSuccess;
    for (int device = 0; device < system.count; ++device) {
        cudaGetLastError();  // an error CUDA does not keep ends here
        // A stream of its own, with an event recorded on it: the smallest work that reaches the context.
        cudaStream_t stream = nullptr;
        cudaEvent_t event = nullptr;
        cudaError_t status = cudaSetDevice(device);
        if (status == cudaSuccess) status = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
        if (status == cudaSuccess) status = cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
        if (status == cudaSuccess) status = cudaEventRecord(event, stream);
        if (status == cudaSuccess) status = cudaEventQuery(event);
        if (status == cudaErrorNotReady) status = cudaSuccess;  // taken, not yet done
        if (event != nullptr) cudaEventDestroy(event);
        if (stream != nullptr) cudaStreamDestroy(stream);
        if (status != cudaSuccess)
            refusing.push_back("GPU " + std::to_string(device) + " (" + cudaGetErrorName(status) + ")");
    }
    cudaGetLastError();
    if (restore) cudaSetDevice(current);
    return join(refusing, ", ");
}

}  // namespace fwi::doctor
