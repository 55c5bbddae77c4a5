// Prints how many CUDA GPUs are visible (0 without a GPU or driver; exit 3 where a driver is installed but
// CUDA cannot use it). The GPU tests' script (run_if_gpus.sh) asks it, so that a test needing more GPUs
// than there are is skipped, not failed, and one on a machine whose GPUs CUDA cannot reach fails.
// With --env-json it prints the env object of a RESULT instead (run_env.hpp: this machine, its GPUs and
// the build), which scripts/compare.sh keeps as the comparison's machine.json. With --other-processes, a
// line for each process with a context on a visible GPU (other_processes.hpp), which compare.sh warns of;
// exit 3 where they cannot be listed (no NVML, or MIG instances named in CUDA_VISIBLE_DEVICES). With
// --memory-mib, each visible GPU's memory in MiB, one line each in CUDA's order (nvidia-smi's order and
// numbers ignore CUDA_VISIBLE_DEVICES), which the tests that size a sweep to a GPU read. With --peer-access,
// 1 where every pair of visible GPUs may have peer access (cudaDeviceCanAccessPeer, both ways), else 0:
// doctor's tests skip on 0 by this answer, not by doctor's own (which they test).
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "device.hpp"
#include "errors.hpp"
#include "other_processes.hpp"
#include "run_env.hpp"

namespace {

bool is(const char* argument, const char* flag) { return std::strcmp(argument, flag) == 0; }

fwi::ExitCode print_other_processes() {
    std::vector<fwi::PciAddress> gpus;
    const int count = fwi::visible_gpu_count_checked();
    for (int device = 0; device < count; ++device) gpus.push_back(fwi::gpu_pci_address(device));
    // This process holds no context on them (it asks CUDA for their addresses only).
    const fwi::OtherProcesses others =
        fwi::find_other_processes(fwi::Nvml(), gpus, {static_cast<unsigned>(getpid())}, false);
    for (const std::string& line : fwi::other_process_lines(others)) std::printf("%s\n", line.c_str());
    if (!others.unknown.empty()) throw fwi::EnvironmentError("other processes on the GPUs: " + others.unknown);
    return fwi::kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
    // Under run_program, so that a count that could not be written is an error (exit 3), not a silent 0.
    return fwi::run_program("visible_gpus", [&] {
        if (argc == 2 && is(argv[1], "--env-json")) {
            std::printf("%s\n", fwi::run_env_json().str().c_str());
            return fwi::kExitOk;
        }
        if (argc == 2 && is(argv[1], "--other-processes")) return print_other_processes();
        if (argc == 2 && is(argv[1], "--peer-access")) {
            std::printf("%d\n", fwi::every_pair_has_peer_access(fwi::visible_gpu_count_checked()) ? 1 : 0);
            return fwi::kExitOk;
        }
        if (argc == 2 && is(argv[1], "--memory-mib")) {
            const int count = fwi::visible_gpu_count_checked();
            for (int device = 0; device < count; ++device) std::printf("%zu\n", fwi::device_memory_bytes(device) >> 20);
            return fwi::kExitOk;
        }
        const char* usage =
            "usage: visible_gpus [--env-json | --other-processes | --memory-mib | --peer-access]\n"
            "  prints how many CUDA GPUs this process sees, with --env-json this machine's description\n"
            "  (the env object of a RESULT), with --other-processes a line for each process with a\n"
            "  context on a visible GPU (exit 3 where they cannot be listed), or with --memory-mib each\n"
            "  visible GPU's memory in MiB, one line each in CUDA's order, or with --peer-access 1 where\n"
            "  every pair of visible GPUs may have peer access, else 0\n";
        if (argc == 2 && (is(argv[1], "--help") || is(argv[1], "-h"))) {
            std::fputs(usage, stdout);
            return fwi::kExitOk;
        }
        if (argc > 2) throw fwi::UsageError("at most one argument, " + std::to_string(argc - 1) + " given");
        if (argc == 2) throw fwi::UsageError("unknown argument '" + fwi::shown_value(argv[1]) + "'");
        std::printf("%d\n", fwi::visible_gpu_count_checked());
        return fwi::kExitOk;
    });
}
