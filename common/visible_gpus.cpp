// Prints how many CUDA GPUs are visible (0 without a GPU or driver; exit 3 where a driver is installed but
// CUDA cannot use it). The GPU tests' script (run_if_gpus.sh) asks it, so that a test needing more GPUs
// than there are is skipped, not failed, and one on a machine whose GPUs CUDA cannot reach fails.
// With --env-json it prints the env object of a RESULT instead (run_env.hpp: this machine, its GPUs and
// the build), which scripts/compare.sh keeps as the comparison's machine.json.
#include <cstdio>
#include <cstring>
#include <string>

#include "device.hpp"
#include "errors.hpp"
#include "run_env.hpp"

int main(int argc, char** argv) {
    // Under run_program, so that a count that could not be written is an error (exit 3), not a silent 0.
    return fwi::run_program("visible_gpus", [&] {
        if (argc == 2 && std::strcmp(argv[1], "--env-json") == 0) {
            std::printf("%s\n", fwi::run_env_json().str().c_str());
            return fwi::kExitOk;
        }
        const char* usage =
            "usage: visible_gpus [--env-json]\n"
            "  prints how many CUDA GPUs this process sees, or with --env-json this machine's\n"
            "  description (the env object of a RESULT)\n";
        if (argc == 2 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0)) {
            std::fputs(usage, stdout);
            return fwi::kExitOk;
        }
        if (argc > 2) throw fwi::UsageError("at most one argument, " + std::to_string(argc - 1) + " given");
        if (argc == 2) throw fwi::UsageError("unknown argument '" + fwi::shown_value(argv[1]) + "'");
        std::printf("%d\n", fwi::visible_gpu_count_checked());
        return fwi::kExitOk;
    });
}
