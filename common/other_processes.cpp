#include "other_processes.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <set>

#include "output.hpp"

namespace fwi {

namespace {

// The process's command name as the kernel keeps it; "" when /proc does not show the process here.
std::string process_name(unsigned pid) { return first_line_of("/proc/" + std::to_string(pid) + "/comm"); }

}  // namespace

int OtherProcesses::process_count() const {
    std::set<unsigned> pids;
    for (const OtherProcess& other : named) pids.insert(other.pid);
    int count = static_cast<int>(pids.size());
    for (const UnnamedProcesses& group : unnamed) count += group.count;
    return count;
}

int OtherProcesses::gpu_count() const {
    std::set<int> gpus;
    for (const OtherProcess& other : named) gpus.insert(other.gpu);
    for (const UnnamedProcesses& group : unnamed) gpus.insert(group.gpu);
    return static_cast<int>(gpus.size());
}

OtherProcesses split_gpu_processes(const std::vector<std::vector<GpuProcess>>& per_gpu,
                                   const std::vector<unsigned>& own, bool own_context,
                                   const std::function<std::string(unsigned)>& name_of) {
    const auto is_own = [&](const GpuProcess& process) {
        return std::find(own.begin(), own.end(), process.pid) != own.end();
    };
    OtherProcesses found;
    for (size_t gpu = 0; gpu < per_gpu.size(); ++gpu) {
        const std::vector<GpuProcess>& listed = per_gpu[gpu];
        if (own_context && listed.empty()) {
            found.hidden.push_back(int(gpu));
            continue;
        }
        if (own_context && std::none_of(listed.begin(), listed.end(), is_own)) {
            if (listed.size() > 1) found.unnamed.push_back({int(gpu), int(listed.size()) - 1});
            continue;
        }
        for (const GpuProcess& process : listed)
            if (!is_own(process))
                found.named.push_back({int(gpu), process.pid, process.used_bytes, name_of(process.pid)});
    }
    return found;
}

OtherProcesses find_other_processes(const Nvml& nvml, const std::vector<PciAddress>& gpus,
                                    const std::vector<unsigned>& own, bool own_context) {
    OtherProcesses found;
    if (gpus.empty()) return found;
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    if (visible && std::strstr(visible, "MIG-")) {
        found.unknown =
            "not listed: CUDA_VISIBLE_DEVICES names MIG instances, and NVML lists the processes of the "
            "whole GPU, other instances' included";
        return found;
    }
    if (!nvml.available()) {
        found.unknown = "not listed: " + nvml.error();
        return found;
    }
    std::vector<std::vector<GpuProcess>> per_gpu(gpus.size());
    std::vector<std::pair<int, std::string>> not_listed;  // each GPU whose list is not read, and why
    for (size_t gpu = 0; gpu < gpus.size(); ++gpu) {
        // However the instance was handed over (CUDA_VISIBLE_DEVICES above, or a container's or job's device
        // rules), NVML lists a MIG-mode GPU's processes of every instance, most of which share none of its SMs.
        if (nvml.in_mig_mode(gpus[gpu])) {
            not_listed.push_back({int(gpu), "in MIG mode: NVML lists the processes of every instance"});
            continue;
        }
        try {
            per_gpu[gpu] = nvml.compute_processes(gpus[gpu]);
        } catch (const std::exception& error) {
            not_listed.push_back({int(gpu), error.what()});
        }
    }
    found = split_gpu_processes(per_gpu, own, own_context, process_name);
    // A list not read is empty, which is not a driver hiding processes.
    for (const auto& [gpu, why] : not_listed) {
        found.hidden.erase(std::remove(found.hidden.begin(), found.hidden.end(), gpu), found.hidden.end());
        found.unknown +=
            (found.unknown.empty() ? "" : "; ") + ("GPU " + std::to_string(gpu) + ": not listed (" + why + ")");
    }
    return found;
}

std::vector<std::string> other_process_lines(const OtherProcesses& found) {
    std::vector<std::string> lines;
    for (const OtherProcess& other : found.named)
        lines.push_back("GPU " + std::to_string(other.gpu) + ": pid " + std::to_string(other.pid) + " (" +
                        (other.name.empty() ? "not visible from here" : other.name) +
                        (other.used_bytes >= 0 ? ", " + size_text(double(other.used_bytes)) : std::string()) + ")");
    for (const UnnamedProcesses& group : found.unnamed)
        lines.push_back("GPU " + std::to_string(group.gpu) + ": " + std::to_string(group.count) + " other process" +
                        (group.count > 1 ? "es" : "") +
                        ", not named (the driver's process ids are another PID namespace's)");
    for (int gpu : found.hidden)
        lines.push_back("GPU " + std::to_string(gpu) +
                        ": the driver lists no process, not even this one, so others may be hidden too");
    return lines;
}

}  // namespace fwi
