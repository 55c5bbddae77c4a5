#include "other_processes.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>

#include "output.hpp"

namespace fwi {

namespace {

// The process's command name as the kernel keeps it; "" when /proc does not show the process here.
std::string process_name(unsigned pid) {
    std::ifstream file("/proc/" + std::to_string(pid) + "/comm");
    std::string name;
    std::getline(file, name);
    return name;
}

bool contains(const std::vector<unsigned>& pids, unsigned pid) {
    return std::find(pids.begin(), pids.end(), pid) != pids.end();
}

}  // namespace

int OtherProcesses::process_count() const {
    std::vector<unsigned> pids;
    for (const OtherProcess& other : named)
        if (!contains(pids, other.pid)) pids.push_back(other.pid);
    int count = static_cast<int>(pids.size());
    for (const auto& [gpu, how_many] : unnamed) count += how_many;
    return count;
}

int OtherProcesses::gpu_count() const {
    std::vector<unsigned> gpus;
    for (const OtherProcess& other : named)
        if (!contains(gpus, unsigned(other.gpu))) gpus.push_back(unsigned(other.gpu));
    for (const auto& [gpu, how_many] : unnamed)
        if (!contains(gpus, unsigned(gpu))) gpus.push_back(unsigned(gpu));
    return static_cast<int>(gpus.size());
}

OtherProcesses sort_gpu_processes(const std::vector<std::vector<GpuProcess>>& per_gpu, const std::vector<unsigned>& own,
                                  bool own_context, const std::function<std::string(unsigned)>& name_of) {
    OtherProcesses found;
    for (size_t gpu = 0; gpu < per_gpu.size(); ++gpu) {
        const std::vector<GpuProcess>& listed = per_gpu[gpu];
        const bool ours_listed = std::any_of(listed.begin(), listed.end(),
                                             [&](const GpuProcess& process) { return contains(own, process.pid); });
        if (own_context && !ours_listed && !listed.empty()) {
            if (listed.size() > 1) found.unnamed.push_back({int(gpu), int(listed.size()) - 1});
            continue;
        }
        for (const GpuProcess& process : listed)
            if (!contains(own, process.pid))
                found.named.push_back({int(gpu), process.pid, process.used_bytes, name_of(process.pid)});
    }
    return found;
}

OtherProcesses find_other_processes(const Nvml& nvml, const std::vector<PciAddress>& gpus,
                                    const std::vector<unsigned>& own, bool own_context) {
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    if (visible && std::strstr(visible, "MIG-")) {
        OtherProcesses found;
        found.unknown =
            "not listed: CUDA_VISIBLE_DEVICES names MIG instances, and NVML lists the processes of the "
            "whole GPU, other instances' included";
        return found;
    }
    std::vector<std::vector<GpuProcess>> per_gpu(gpus.size());
    std::string unknown;
    for (size_t gpu = 0; gpu < gpus.size(); ++gpu) {
        try {
            per_gpu[gpu] = nvml.compute_processes(gpus[gpu]);
        } catch (const std::exception& error) {
            if (unknown.empty()) unknown = "GPU " + std::to_string(gpu) + ": not listed (" + error.what() + ")";
        }
    }
    OtherProcesses found = sort_gpu_processes(per_gpu, own, own_context, process_name);
    found.unknown = unknown;
    return found;
}

std::vector<std::string> other_process_lines(const OtherProcesses& found) {
    std::vector<std::string> lines;
    for (const OtherProcess& other : found.named)
        lines.push_back("GPU " + std::to_string(other.gpu) + ": pid " + std::to_string(other.pid) + " (" +
                        (other.name.empty() ? "not visible from here" : other.name) +
                        (other.used_bytes >= 0 ? ", " + size_text(double(other.used_bytes)) : std::string()) + ")");
    for (const auto& [gpu, how_many] : found.unnamed)
        lines.push_back("GPU " + std::to_string(gpu) + ": " + std::to_string(how_many) + " other process" +
                        (how_many > 1 ? "es" : "") +
                        ", not named (the driver's process ids are not this container's, so which are whose "
                        "cannot be told)");
    return lines;
}

}  // namespace fwi
