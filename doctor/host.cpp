#include "host.hpp"

#include <sys/resource.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <sstream>

#include "cli.hpp"
#include "cuda_check.hpp"
#include "errors.hpp"
#include "nccl_comm.hpp"
#include "output.hpp"
#include "run_env.hpp"

namespace fwi::doctor {

namespace {

bool starts_with(const std::string& text, const std::string& prefix) { return text.rfind(prefix, 0) == 0; }

std::string limit_text(rlim_t limit) {
    return limit == RLIM_INFINITY ? "unlimited" : size_text(static_cast<double>(limit));
}

}  // namespace

Injection parse_injection(const std::string& text) {
    Injection injection;
    injection.text = text;
    if (text.empty()) return injection;  // unset or empty: no fault
    for (const std::string& name : split_choice_list("FWI_DOCTOR_INJECT", text,
                                                     {"corrupt-peer", "hang-peer-kernel", "fault-peer-kernel",
                                                      "hang-nccl", "fail-rank1", "busy-gpu-rank1", "nccl-no-memory"},
                                                     "fault")) {  // as a flag's list
        injection.corrupt_peer |= name == "corrupt-peer";
        injection.hang_peer_kernel |= name == "hang-peer-kernel";
        injection.fault_peer_kernel |= name == "fault-peer-kernel";
        injection.hang_nccl |= name == "hang-nccl";
        injection.fail_rank1 |= name == "fail-rank1";
        injection.busy_gpu_rank1 |= name == "busy-gpu-rank1";
        injection.nccl_no_memory |= name == "nccl-no-memory";
    }
    return injection;
}

Injection injection_from_environment() {
    const char* text = std::getenv("FWI_DOCTOR_INJECT");
    try {
        return parse_injection(text ? text : "");
    } catch (const UsageError& error) {  // a variable's value, not a flag's
        throw BadSettingError(error.what());
    }
}

Variables relevant_variables(const std::vector<std::string>& entries) {
    Variables variables;
    for (const auto& entry : entries) {
        const size_t equals = entry.find('=');
        if (equals == std::string::npos) continue;
        const std::string name = entry.substr(0, equals);
        if (starts_with(name, "CUDA_") || starts_with(name, "NCCL_") || starts_with(name, "OMPI_"))
            variables.emplace_back(name, entry.substr(equals + 1));
    }
    std::sort(variables.begin(), variables.end());
    return variables;
}

Variables relevant_variables_in_effect() { return relevant_variables(environment_entries()); }

bool worth_showing(const std::string& name) {
    if (!starts_with(name, "OMPI_")) return true;
    static const char* const kUserSettings[] = {"OMPI_COMM_WORLD_SIZE", "OMPI_ALLOW_RUN_AS_ROOT", "OMPI_MCA_btl",
                                                "OMPI_MCA_pml",         "OMPI_MCA_mtl",           "OMPI_MCA_coll",
                                                "OMPI_MCA_osc",         "OMPI_MCA_opal_cuda",     "OMPI_MCA_mpi_cuda"};
    for (const char* prefix : kUserSettings)
        if (starts_with(name, prefix)) return true;
    return false;
}

std::string value_of(const Variables& variables, const std::string& name) {
    for (const auto& [key, value] : variables)
        if (key == name) return value;
    return "";
}

bool is_set(const Variables& variables, const std::string& name) {
    for (const auto& entry : variables)
        if (entry.first == name) return true;
    return false;
}

std::vector<std::string> environment_lines(const Variables& variables) {
    std::vector<std::string> lines;
    if (!is_set(variables, "CUDA_VISIBLE_DEVICES")) lines.push_back("CUDA_VISIBLE_DEVICES (unset: every GPU)");
    int hidden = 0;
    for (const auto& [name, value] : variables) {
        if (worth_showing(name))
            lines.push_back(name + "=" + shown_path(value));  // escaped, and whole (a list of GPU UUIDs is long)
        else
            ++hidden;
    }
    if (hidden) lines.push_back("(" + std::to_string(hidden) + " more OMPI_* variables of mpirun's own: see --json)");
    return lines;
}

JsonObject environment_json(const Variables& variables) {
    JsonObject json;
    for (const auto& [name, value] : variables) json.add(name, value);
    return json;
}

bool nccl_disable_set(const std::string& value) { return std::strtoll(value.c_str(), nullptr, 0) == 1; }

std::string p2p_level_name(const std::string& value) {
    if (value.empty() || !std::isdigit(static_cast<unsigned char>(value[0]))) return value;
    static const char* const kOldLevels[] = {"LOC", "PIX", "PXB", "PHB", "SYS"};
    return kOldLevels[std::min(std::strtol(value.c_str(), nullptr, 0), 4L)];
}

bool p2p_level_below_default(const std::string& value) {
    const std::string name = p2p_level_name(value);
    for (const char* level : {"LOC", "NVL", "NVB", "C2C", "PIX"})
        if (name == level) return true;
    return false;
}

std::vector<NcclSettingNote> nccl_setting_notes(const Variables& variables) {
    struct Known {
        const char* name;
        const char* meaning;
        bool (*slows)(const std::string& value);  // whether the value takes a faster path away
    };
    const auto forces = [](const std::string& value) { return !value.empty(); };
    const auto never = [](const std::string&) { return false; };
    static const Known kKnown[] = {
        {"NCCL_P2P_DISABLE",
         "NCCL does not use P2P (NVLink or PCIe) between GPUs; data goes through host memory, several times slower",
         nccl_disable_set},
        {"NCCL_SHM_DISABLE",
         "NCCL does not pass data through shared host memory where P2P is not available; such GPUs fall back to its "
         "network transport",
         nccl_disable_set},
        {"NCCL_P2P_LEVEL",
         "limits P2P to GPU pairs at most this far apart (LOC: none; NVL: NVLink only; PIX: one PCIe switch; PXB, "
         "NCCL's default: no CPU between them; PHB, SYS: further)",
         p2p_level_below_default},
        {"NCCL_ALGO", "forces NCCL's algorithm; its own choice is usually faster", forces},
        {"NCCL_PROTO", "forces NCCL's protocol; its own choice is usually faster", forces},
        {"NCCL_CUMEM_ENABLE", "changes how NCCL maps peer memory (cuMem or legacy IPC)", never},
        {"NCCL_NVLS_ENABLE", "NVLink SHARP (multicast); this suite keeps it at 0", never},
        {"NCCL_RUNTIME_CONNECT",
         "when NCCL connects the ranks: 0, the suite's default, while making a communicator; 1 at its first "
         "collective, a setup inside that call which waits for the other ranks without the suite's time limit",
         never},
        {"NCCL_COMM_BLOCKING",
         "overrides whether communicators are blocking; at 1 the suite's communicators are made by calls that wait "
         "inside NCCL, without its time limit",
         never},
        {"NCCL_LAUNCH_MODE",
         "at GROUP the GPUs of one process wait for each other inside their NCCL calls, without the suite's time "
         "limit (PARALLEL, the default, launches each GPU's work on its own)",
         never},
        {"NCCL_IB_DISABLE",
         "InfiniBand off: NCCL's network transport uses TCP sockets (across nodes, or within a node when P2P and SHM "
         "are off)",
         never},
        {"NCCL_SOCKET_IFNAME",
         "the network interfaces NCCL's bootstrap and socket transport may use (a prefix; ^ excludes, = matches "
         "exactly): one that no host has fails NCCL's set-up, and one the hosts cannot reach each other on hangs it",
         never},
        {"NCCL_IB_HCA",
         "the InfiniBand adapters (and ports) NCCL may use across nodes: one left out is bandwidth left unused", never},
        {"NCCL_NET", "forces NCCL's network transport (IB or Socket) across nodes; Socket over a slow interface crawls",
         never},
    };
    std::vector<NcclSettingNote> notes;
    for (const Known& known : kKnown) {
        if (!is_set(variables, known.name)) continue;
        const std::string value = value_of(variables, known.name);
        notes.push_back({known.name, std::string(known.name) + "=" + value, known.meaning, known.slows(value)});
    }
    return notes;
}

DriverTraces read_driver_traces() {
    DriverTraces traces;
    traces.kernel_module = first_line_of("/proc/driver/nvidia/version");
    std::error_code error;
    traces.control_node = std::filesystem::exists("/dev/nvidiactl", error);
    for (int gpu = 0; gpu < 64; ++gpu)
        if (std::filesystem::exists("/dev/nvidia" + std::to_string(gpu), error)) ++traces.gpu_nodes;
    traces.wsl_gpu = std::filesystem::exists("/dev/dxg", error);
    const char* path = std::getenv("PATH");
    std::stringstream directories(path ? path : "");
    for (std::string directory; std::getline(directories, directory, ':');) {
        const std::string candidate = (directory.empty() ? "." : directory) + "/nvidia-smi";
        if (access(candidate.c_str(), X_OK) == 0) {
            traces.nvidia_smi = candidate;
            break;
        }
    }
    return traces;
}

namespace {

struct Cause {
    std::string summary;
    std::string next;
};

Cause most_likely_cause(const NoGpuFacts& facts) {
    const DriverTraces& traces = facts.traces;
    // WSL2 has neither the kernel module nor /dev/nvidia*: the Windows driver provides CUDA through /dev/dxg.
    constexpr const char* kWslAdvice =
        "install or update the NVIDIA driver on Windows, which WSL2 takes CUDA from (libcuda.so.1 in "
        "/usr/lib/wsl/lib); do not install a Linux driver inside WSL, which hides it; then `nvidia-smi` in WSL";
    if (traces.wsl_gpu && facts.driver_version == 0)
        return {"WSL2 (/dev/dxg) without libcuda.so.1, which the Windows driver provides", kWslAdvice};
    if (facts.driver_version == 0 && traces.kernel_module.empty())
        return {"no NVIDIA driver: no kernel module (/proc/driver/nvidia) and no libcuda.so.1",
                "install the NVIDIA driver until `nvidia-smi` lists the GPUs; in a container, start it with --gpus all "
                "(NVIDIA Container Toolkit)"};
    if (facts.driver_version == 0)
        return {"the kernel module is loaded but libcuda.so.1 (the driver's user-space part) was not found",
                "install the user-space driver libraries of the same version as the kernel module; in a container, use "
                "the NVIDIA Container Toolkit (--gpus all), which mounts them"};
    // A GPU in MIG mode shows CUDA its compute instances only: none where none were made.
    if (facts.cuda_error == "cudaErrorNoDevice" && facts.gpus_in_mig_mode > 0 &&
        facts.gpus_in_mig_mode == facts.nvml_gpus && !facts.visible_devices_set)
        return {"every GPU the driver sees is in MIG mode (" + std::to_string(facts.gpus_in_mig_mode) +
                    "), and CUDA sees no instance of one: none made, or none this process may use",
                "`nvidia-smi -L` lists the GPUs and their MIG instances: make a GPU and compute instance (`nvidia-smi "
                "mig -cgi <profile> -C`, as root), or turn MIG mode off (`nvidia-smi -i <GPU> -mig 0`, as root) for "
                "peer access and NCCL between whole GPUs"};
    if (facts.visible_devices_set)
        return {"CUDA_VISIBLE_DEVICES='" + shown_path(facts.visible_devices) + "' hides " +  // escaped: one line
                    (facts.nvml_gpus > 0 ? "the " + std::to_string(facts.nvml_gpus) + " GPUs the driver sees"
                                         : "every GPU"),
                "unset CUDA_VISIBLE_DEVICES, or list the GPUs to use by index (0,1) or by UUID (`nvidia-smi -L`)"};
    if (facts.cuda_error == "cudaErrorInsufficientDriver")
        return {"the driver supports CUDA " + cuda_version_text(facts.driver_version) +
                    ", older than this build's runtime (CUDA " + cuda_version_text(facts.runtime_version) + ")",
                older_driver_advice(facts.driver_version, facts.runtime_version)};
    if (facts.cuda_error == "cudaErrorSystemNotReady")
        return {"the system is not ready: on NVSwitch machines (HGX, DGX) the fabric manager must be running",
                "sudo systemctl start nvidia-fabricmanager, then check `nvidia-smi -q | grep -i -A2 fabric`"};
    if (facts.cuda_error == "cudaErrorDevicesUnavailable")
        return {"every GPU is busy or in a compute mode that refuses this process",
                "see `nvidia-smi` for the processes holding them and `nvidia-smi -q | grep -i 'compute mode'`"};
    if (traces.wsl_gpu && !traces.control_node && traces.gpu_nodes == 0)
        return {"WSL2 (/dev/dxg), and CUDA sees no GPU through it", kWslAdvice};
    if (!traces.control_node && traces.gpu_nodes == 0)
        return {"no /dev/nvidia* device nodes: the GPUs are not visible to this system or container",
                "on the host: `nvidia-smi`; in a container: start it with --gpus all"};
    if (facts.nvml_gpus > 0)
        return {"the driver sees " + std::to_string(facts.nvml_gpus) + " GPU(s) but CUDA sees none",
                "check the permissions of /dev/nvidia* (cgroups, container device rules) and `dmesg | grep -i nvrm`"};
    return {"cudaGetDeviceCount: " + facts.cuda_error, "run `nvidia-smi` and `dmesg | grep -i -e nvrm -e xid`"};
}

}  // namespace

Finding diagnose_no_gpu(const NoGpuFacts& facts) {
    const Cause cause = most_likely_cause(facts);
    Finding finding;
    finding.id = "devices";
    finding.status = Status::fail;
    finding.summary = "no CUDA GPU visible: " + cause.summary;
    finding.next = cause.next;
    const DriverTraces& traces = facts.traces;
    finding.details = {
        "cudaGetDeviceCount: " + facts.cuda_error,
        "CUDA driver: " +
            (facts.driver_version ? cuda_version_text(facts.driver_version) : std::string("not found (libcuda.so.1)")) +
            "; CUDA runtime of this build: " + cuda_version_text(facts.runtime_version),
        "kernel module: " + (traces.kernel_module.empty() ? std::string("not loaded (no /proc/driver/nvidia/version)")
                                                          : traces.kernel_module),
        "device nodes: /dev/nvidiactl " + std::string(traces.control_node ? "present" : "absent") + ", " +
            std::to_string(traces.gpu_nodes) + " /dev/nvidiaN" + (traces.wsl_gpu ? ", /dev/dxg present (WSL2)" : ""),
        "NVML: " + (facts.nvml_gpus >= 0 ? std::to_string(facts.nvml_gpus) + " GPU(s)" : std::string("not available")),
        "nvidia-smi: " + (traces.nvidia_smi.empty() ? std::string("not found on PATH") : traces.nvidia_smi),
    };
    finding.facts.add("cuda_error", facts.cuda_error)
        .add("driver_version", facts.driver_version)
        .add("runtime_version", facts.runtime_version)
        .add("kernel_module", traces.kernel_module)
        .add("dev_nvidiactl", traces.control_node)
        .add("dev_gpu_nodes", traces.gpu_nodes)
        .add("dev_dxg", traces.wsl_gpu)
        .add("nvml_gpus", facts.nvml_gpus)
        .add("nvidia_smi", traces.nvidia_smi);
    return finding;
}

IommuHints parse_iommu_hints(const std::string& kernel_command_line) {
    IommuHints hints;
    std::stringstream stream(kernel_command_line);
    for (std::string option; stream >> option;) {
        if (option.find("iommu") == std::string::npos) continue;
        hints.options.push_back(option);
        if (option == "intel_iommu=on" || option == "amd_iommu=on" || option == "amd_iommu=force_enable")
            hints.enabled_by_option = true;
        if (option == "intel_iommu=off" || option == "amd_iommu=off" || option == "iommu=off")
            hints.disabled_by_option = true;
        if (option == "iommu=pt" || option == "iommu.passthrough=1") hints.passthrough = true;
    }
    return hints;
}

bool nccl_stack_sizing_turned_off(const std::string& set_cpu_stack_size) {
    // NCCL reads the value as an integer (strtoll, any base): 0, 00 or 0x0 turn the sizing off, and text that
    // is not a number leaves NCCL's default, on.
    char* end = nullptr;
    const long long value = std::strtoll(set_cpu_stack_size.c_str(), &end, 0);
    return !set_cpu_stack_size.empty() && *end == '\0' && value == 0;
}

std::string stack_limit_problem(bool unlimited, unsigned long long limit_bytes, const std::string& nccl_version,
                                const std::string& set_cpu_stack_size) {
    const bool small = !unlimited && limit_bytes < 8ull * 1024 * 1024;
    if (!unlimited && !small) return "";
    int major = 0, minor = 0;
    const bool turned_off = nccl_stack_sizing_turned_off(set_cpu_stack_size);
    const bool sizes_its_stacks = std::sscanf(nccl_version.c_str(), "%d.%d", &major, &minor) == 2 &&
                                  (major > 2 || (major == 2 && minor >= 28)) && !turned_off;
    if (sizes_its_stacks) return "";
    const std::string nccl = "NCCL " + nccl_version + (turned_off ? " with NCCL_SET_CPU_STACK_SIZE=0" : "");
    if (small)
        return "the stack limit (" + limit_text(limit_bytes) + ") is below 8 MiB, and " + nccl +
               " gives its threads stacks of that size (NCCL 2.28 and later raise them to 8 MiB)";
    return "the stack limit is unlimited, which gives the threads of " + nccl +
           " only 2 MiB of stack (glibc), too little for its topology search on large machines (NCCL 2.28 and later "
           "raise them to 8 MiB)";
}

bool iommu_translates(const std::vector<std::string>& group_types, const IommuHints& hints, int groups) {
    if (!group_types.empty())
        return std::any_of(group_types.begin(), group_types.end(),
                           [](const std::string& type) { return type.rfind("DMA", 0) == 0; });
    const bool active = (groups > 0 || hints.enabled_by_option) && !hints.disabled_by_option;
    return active && !hints.passthrough;
}

std::vector<std::string> gpu_iommu_group_types(const std::string& sysfs_root, const std::vector<PciePair>& pairs) {
    const std::filesystem::path devices = std::filesystem::path(sysfs_root) / "bus" / "pci" / "devices";
    std::vector<std::string> gpus, types;
    for (const PciePair& pair : pairs)
        for (const std::string& gpu : {pair.first, pair.second})
            if (std::find(gpus.begin(), gpus.end(), gpu) == gpus.end()) gpus.push_back(gpu);
    for (const std::string& gpu : gpus) {
        const std::string type = first_line_of((devices / gpu / "iommu_group" / "type").string());
        if (type.empty()) return {};
        types.push_back(type);
    }
    return types;
}

HostProblem shared_memory_problem(double total_bytes, double free_bytes) {
    constexpr double kLeast = 1024.0 * 1024 * 1024;
    if (total_bytes < kLeast)
        return {"/dev/shm is missing or small",
                "NCCL and MPI keep buffers in /dev/shm: in Docker start with --shm-size=8g or --ipc=host"};
    if (free_bytes < std::min(kLeast, total_bytes / 4))  // nearly full: less than 1 GiB and than a quarter left
        return {"/dev/shm has " + size_text(free_bytes) + " free of " + size_text(total_bytes),
                "NCCL and MPI keep buffers in /dev/shm: remove what jobs that were killed left there (`ls -lt "
                "/dev/shm`: files of no running process)"};
    return {};
}

bool has_infiniband_devices() {
    std::error_code error;
    return !std::filesystem::is_empty("/sys/class/infiniband", error) && !error;
}

std::string locked_memory_problem(bool infiniband_devices, bool unlimited, const std::string& limit) {
    if (!infiniband_devices || unlimited) return "";
    return "locked memory is limited to " + limit +
           " on a host with InfiniBand devices, whose transport locks NCCL's buffers";
}

namespace {

// /dev/shm: shared_memory_problem says what is wrong with it.
void add_shared_memory(Finding& finding, std::vector<HostProblem>& problems) {
    struct statvfs shm {};
    double total = 0.0, free = 0.0;
    if (statvfs("/dev/shm", &shm) != 0) {
        finding.details.push_back("/dev/shm: missing");
        finding.facts.add("dev_shm_bytes", 0LL);
    } else {
        total = double(shm.f_blocks) * shm.f_frsize;
        free = double(shm.f_bavail) * shm.f_frsize;
        finding.details.push_back("/dev/shm: " + size_text(total) + " (" + size_text(free) + " free)");
        finding.facts.add("dev_shm_bytes", total).add("dev_shm_free_bytes", free);
    }
    const HostProblem problem = shared_memory_problem(total, free);
    if (!problem.what.empty()) problems.push_back(problem);
}

void add_limits(Finding& finding, std::vector<HostProblem>& problems) {
    rlimit stack{}, locked{};
    getrlimit(RLIMIT_STACK, &stack);
    getrlimit(RLIMIT_MEMLOCK, &locked);
    finding.details.push_back("stack limit: " + limit_text(stack.rlim_cur) +
                              "; locked memory limit: " + limit_text(locked.rlim_cur) +
                              " (InfiniBand / GPUDirect RDMA across nodes want unlimited)");
    finding.facts.add("stack_limit", limit_text(stack.rlim_cur)).add("memlock_limit", limit_text(locked.rlim_cur));
    // (From the environment: a value in an NCCL config file is not seen here.)
    const std::string set_cpu_stack_size = value_of(relevant_variables_in_effect(), "NCCL_SET_CPU_STACK_SIZE");
    const std::string stack_problem =
        stack_limit_problem(stack.rlim_cur == RLIM_INFINITY, stack.rlim_cur, nccl_version_number(), set_cpu_stack_size);
    if (!stack_problem.empty())
        problems.push_back(
            {stack_problem, std::string("set the usual 8 MiB: ulimit -s 8192 (in every rank's environment)") +
                                (nccl_stack_sizing_turned_off(set_cpu_stack_size)
                                     ? ", or unset NCCL_SET_CPU_STACK_SIZE (with NCCL 2.28 or later)"
                                     : "")});
    const std::string locked_problem =
        locked_memory_problem(has_infiniband_devices(), locked.rlim_cur == RLIM_INFINITY, limit_text(locked.rlim_cur));
    if (!locked_problem.empty())
        problems.push_back({locked_problem, "ulimit -l unlimited (in a container: --ulimit memlock=-1)"});
}

// "2 DMA, 3 identity": how many groups of each type, by type.
std::string counted_types(const std::vector<std::string>& types) {
    std::map<std::string, int> counts;
    for (const std::string& type : types) ++counts[type];
    std::string text;
    for (const auto& [type, count] : counts) text += (text.empty() ? "" : ", ") + std::to_string(count) + " " + type;
    return text;
}

// Adds a problem when the IOMMU translates the addresses of GPUs whose pairs talk over PCIe (`pcie_pairs`:
// known, as check 2 ran): their own groups decide where sysfs names them, else the machine's. Returns
// whether it translates any device's addresses.
bool add_iommu(Finding& finding, std::vector<HostProblem>& problems, const std::vector<PciePair>& pcie_pairs) {
    const IommuHints hints = parse_iommu_hints(first_line_of("/proc/cmdline"));
    std::error_code error;
    int groups = 0;
    std::vector<std::string> types;
    for (auto it = std::filesystem::directory_iterator("/sys/kernel/iommu_groups", error);
         !error && it != std::filesystem::directory_iterator(); it.increment(error)) {
        ++groups;
        const std::string type = first_line_of((it->path() / "type").string());
        if (!type.empty()) types.push_back(type);
    }
    std::string options;
    for (const auto& option : hints.options) options += (options.empty() ? "" : " ") + option;
    const bool active = groups > 0 || (hints.enabled_by_option && !hints.disabled_by_option);
    const bool translating = iommu_translates(types, hints, groups);
    // A host may translate for some devices only (iommu=pt with a few devices in DMA domains): the GPUs'
    // own groups are what their peer traffic meets.
    const std::vector<std::string> gpu_types = gpu_iommu_group_types("/sys", pcie_pairs);
    const bool gpus_translated = gpu_types.empty() ? translating : iommu_translates(gpu_types, hints, groups);
    const std::string type_text = counted_types(types), gpu_type_text = counted_types(gpu_types);
    finding.details.push_back(
        "IOMMU: " + std::string(active ? "active" : "not active") + " (" + std::to_string(groups) + " IOMMU groups" +
        (type_text.empty() ? "" : " of types " + type_text) + "; kernel options: " +
        (options.empty() ? "none" : options) + ")" + (translating ? ", translating device addresses" : "") +
        (gpu_type_text.empty() ? "" : "; the GPUs paired over PCIe, by their group's type: " + gpu_type_text));
    finding.facts.add("iommu_groups", groups)
        .add("iommu_group_types", type_text)
        .add("iommu_kernel_options", options)
        .add("iommu_translating", translating)
        .add("iommu_gpu_group_types", gpu_type_text);
    if (gpus_translated && !pcie_pairs.empty())
        problems.push_back(
            {"the IOMMU translates PCIe peer traffic",
             "PCIe P2P through a translating IOMMU is slow or returns wrong data: boot with iommu=pt (intel_iommu=on "
             "iommu=pt) or turn the IOMMU off, and check ACS with `lspci -vvv | grep -i acsctl`"});
    return translating;
}

// Adds what ACS says on the PCIe switch ports between the pairs (pcie_acs.hpp), and a problem for each port
// that turns peer traffic away; what it could not judge goes to `unjudged`.
void add_acs(Finding& finding, std::vector<HostProblem>& problems, std::vector<std::string>& unjudged,
             const PeerPairs& peer_pairs) {
    if (!peer_pairs.checked) {
        finding.details.push_back("ACS: not read (the GPU pairs are known only when check 2 runs)");
        unjudged.push_back("ACS (the GPU pairs are known only when check 2 runs)");
        return;
    }
    const std::vector<PciePair>& pairs = peer_pairs.pcie;
    if (pairs.empty()) {  // where the links are unknown, no pair has peer access at all (one GPU, say)
        finding.details.push_back("ACS: not read (no GPU pair with peer access talks over PCIe only)");
        return;
    }
    if (!peer_pairs.links_known) {
        finding.details.push_back("ACS: not read (without NVML, NVLink cannot be told from PCIe)");
        unjudged.push_back("ACS (without NVML, NVLink cannot be told from PCIe)");
        return;
    }
    const AcsReading acs = read_acs("/sys", pairs);
    const AcsVerdict verdict = acs_verdict(acs, pairs.size());
    finding.details.push_back(verdict.line);
    finding.facts.add("acs_switch_ports", acs.ports)
        .add("acs_redirecting_ports", acs.redirecting)
        .add("acs_unreadable_ports", acs.unreadable);
    if (!verdict.problem.empty()) problems.push_back({verdict.problem, verdict.fix});
    if (!verdict.unread.empty()) unjudged.push_back(verdict.unread);
}

// The finding's status, summary and advice from its problems: PASS with `fine` where there are none.
void conclude(Finding& finding, const std::vector<HostProblem>& problems, const std::string& fine) {
    if (problems.empty()) {
        finding.summary = fine;
        return;
    }
    finding.status = Status::warn;
    for (const auto& problem : problems) {
        finding.summary += (finding.summary.empty() ? "" : "; ") + problem.what;
        finding.next += (finding.next.empty() ? "" : "; ") + problem.fix;
    }
}

}  // namespace

Finding check_host(const PeerPairs& pairs) {
    Finding finding;
    finding.id = "host";
    std::vector<HostProblem> problems;
    add_shared_memory(finding, problems);
    add_limits(finding, problems);
    std::vector<std::string> unjudged;  // what could not be read or related to the GPU pairs
    const bool translating = add_iommu(finding, problems, pairs.checked ? pairs.pcie : std::vector<PciePair>{});
    if (translating && !pairs.checked)
        unjudged.push_back(
            "whether the translating IOMMU is on a GPU pair's path (the pairs are known only when check "
            "2 runs)");
    // Not a WARN: pairs on different CPU sockets have no peer access on any healthy machine.
    if (translating && pairs.without_access > 0)
        finding.details.push_back(
            "the IOMMU translates, and " + std::to_string(pairs.without_access) +
            " GPU pair(s) have no peer access (check 2): a translating IOMMU is one reason a driver refuses peer "
            "access; booting with iommu=pt rules it out");
    add_acs(finding, problems, unjudged, pairs);
    conclude(finding, problems,
             unjudged.empty() ? "shared memory, limits, IOMMU and ACS settings look fine"
                              : "shared memory and limits look fine");
    if (!unjudged.empty()) finding.summary += "; not judged: " + join(unjudged, "; ");
    return finding;
}

Finding check_host_memory_and_limits() {
    Finding finding;
    finding.id = "host";
    std::vector<HostProblem> problems;
    add_shared_memory(finding, problems);
    add_limits(finding, problems);
    conclude(finding, problems, "shared memory and limits look fine");
    return finding;
}

}  // namespace fwi::doctor
