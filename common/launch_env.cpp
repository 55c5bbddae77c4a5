#include "launch_env.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "errors.hpp"

namespace fwi {

namespace {

// A variable that a launcher sets to the number of ranks it started, and what to say when it names more
// than MPI sees.
struct LaunchVariable {
    const char* name;
    const char* set_by;
    const char* launch;  // how to start the ranks instead
};

// Set by the MPI launcher that started this process: authoritative. One of them set to 1 means one rank
// on purpose (`mpirun -np 1` inside a Slurm allocation of 4 tasks is fine).
constexpr LaunchVariable kMpiLauncherVariables[] = {
    {"OMPI_COMM_WORLD_SIZE", "Open MPI's mpirun",
     "Start it with the mpirun of the MPI this program was built with: `mpirun -np N`"},
    {"PMI_SIZE", "MPICH/Intel MPI's mpiexec (Hydra) or srun --mpi=pmi2",
     "Start it with the mpirun of the MPI this program was built with (`mpirun -np N`), or with `srun --mpi=pmix -n N` "
     "under Slurm"},
    {"MV2_COMM_WORLD_SIZE", "MVAPICH's mpirun_rsh",
     "Start it with the mpirun of the MPI this program was built with: `mpirun -np N`"},
};
// Set by a job's launcher or scheduler that does not start MPI ranks itself.
constexpr LaunchVariable kOtherLauncherVariables[] = {
    {"SLURM_NTASKS", "Slurm (sbatch, salloc, srun)",
     "Start the ranks with `srun --mpi=pmix -n N` (or `mpirun -np N` inside the allocation)"},
    {"SLURM_NPROCS", "Slurm (sbatch, salloc, srun)",
     "Start the ranks with `srun --mpi=pmix -n N` (or `mpirun -np N` inside the allocation)"},
    {"WORLD_SIZE", "torchrun (or a launcher like it), which starts processes but not MPI ranks",
     "Start it with `mpirun -np N` (or `srun --mpi=pmix -n N` under Slurm)"},
};

// The variable's value in `environment` as a rank count; 0 when unset or empty. Throws BadSettingError when
// it is set to anything but a positive number of ranks MPI can count (an int): no launcher sets that, and a
// junk value read as "unset" would let a mistaken launch through unseen.
int ranks_named_by(const LaunchEnvironment& environment, const LaunchVariable& variable) {
    const auto found = environment.find(variable.name);
    if (found == environment.end() || found->second.empty()) return 0;
    const std::string& text = found->second;
    const auto refuse = [&](const std::string& setting, const std::string& what) {
        return BadSettingError(setting + " (set by " + variable.set_by + ") is " + what +
                               ", which no launcher sets: unset it, or start the program again with its launcher");
    };
    const std::string setting = std::string(variable.name) + "=" + shown_value(text);
    if (!std::all_of(text.begin(), text.end(), [](unsigned char c) { return c >= '0' && c <= '9'; }))
        throw refuse(std::string(variable.name) + "='" + shown_value(text) + "'", "not a number of ranks");
    errno = 0;
    const long long value = std::strtoll(text.c_str(), nullptr, 10);
    if (errno == ERANGE || value > std::numeric_limits<int>::max())
        throw refuse(setting,
                     "more ranks than MPI can start (at most " + std::to_string(std::numeric_limits<int>::max()) + ")");
    if (value == 0) throw refuse(setting, "zero ranks");
    return static_cast<int>(value);
}

std::string with_ranks(std::string text, int ranks) {
    for (size_t at; (at = text.find(" N")) != std::string::npos;) text.replace(at, 2, " " + std::to_string(ranks));
    return text;
}

std::string mismatch_message(const LaunchVariable& variable, int ranks) {
    return "the environment says " + std::to_string(ranks) + " ranks (" + variable.name + "=" + std::to_string(ranks) +
           ", set by " + variable.set_by +
           ") but MPI started this process alone (MPI_Comm_size(MPI_COMM_WORLD) = 1): each process would run the whole "
           "job by itself. " +
           with_ranks(variable.launch, ranks) + "; for one rank on purpose, `mpirun -np 1` or unset " + variable.name;
}

}  // namespace

LaunchEnvironment launch_environment() {
    LaunchEnvironment environment;
    const auto read = [&](const LaunchVariable& variable) {
        if (const char* value = std::getenv(variable.name)) environment[variable.name] = value;
    };
    for (const LaunchVariable& variable : kMpiLauncherVariables) read(variable);
    for (const LaunchVariable& variable : kOtherLauncherVariables) read(variable);
    return environment;
}

std::string launch_mismatch(int mpi_world_size, const LaunchEnvironment& environment) {
    if (mpi_world_size != 1) return "";
    bool launched_as_one = false;
    for (const LaunchVariable& variable : kMpiLauncherVariables) {
        const int ranks = ranks_named_by(environment, variable);
        if (ranks > 1) return mismatch_message(variable, ranks);
        launched_as_one = launched_as_one || ranks == 1;
    }
    if (launched_as_one) return "";
    for (const LaunchVariable& variable : kOtherLauncherVariables)
        if (const int ranks = ranks_named_by(environment, variable); ranks > 1)
            return mismatch_message(variable, ranks);
    return "";
}

std::string mpi_launcher_ranks(const LaunchEnvironment& environment) {
    for (const LaunchVariable& variable : kMpiLauncherVariables) {
        const int ranks = ranks_named_by(environment, variable);
        if (ranks > 1) return std::string(variable.name) + "=" + std::to_string(ranks) + ", set by " + variable.set_by;
        if (ranks == 1) return "";
    }
    return "";
}

void refuse_launch_as_several_ranks(const std::string& instead) {
    if (const std::string launched = mpi_launcher_ranks(launch_environment()); !launched.empty())
        throw BadSettingError(
            "started as one of several MPI ranks (" + launched +
            "): each would run the whole program on the same GPUs; " + instead +
            " (to run independent copies on purpose, each with GPUs of its own, unset the variable in "
            "each)");
}

namespace {
// What a set CUDA_VISIBLE_DEVICES does to the GPUs a process sees.
enum class VisibleDevices { mig_instances, list_cut_short, shown };

// How many GPUs the list names: its comma-separated entries.
int named_entries(const std::string& cuda_visible_devices) {
    if (cuda_visible_devices.empty()) return 0;
    return int(std::count(cuda_visible_devices.begin(), cuda_visible_devices.end(), ',')) + 1;
}

VisibleDevices visible_devices_case(int shown, const std::string& cuda_visible_devices) {
    if (cuda_visible_devices.find("MIG-") != std::string::npos) return VisibleDevices::mig_instances;
    return named_entries(cuda_visible_devices) > shown ? VisibleDevices::list_cut_short : VisibleDevices::shown;
}
}  // namespace

std::string visible_devices_text(int shown, const std::string& cuda_visible_devices) {
    const std::string gpus = count_of(shown, "GPU");
    const std::string variable = "CUDA_VISIBLE_DEVICES=" + shown_value(cuda_visible_devices);
    switch (visible_devices_case(shown, cuda_visible_devices)) {
        case VisibleDevices::mig_instances:
            return "CUDA_VISIBLE_DEVICES names MIG instances, and CUDA shows a process at most one of them";
        case VisibleDevices::list_cut_short:
            return variable + " names " + std::to_string(named_entries(cuda_visible_devices)) +
                   ", of which CUDA shows " + gpus + ": it stops at the first entry that names no GPU it can use";
        case VisibleDevices::shown:
            break;
    }
    return variable + " shows " + gpus;
}

std::string too_few_gpus_hint(int visible, const char* cuda_visible_devices) {
    if (!cuda_visible_devices)
        return "this machine shows CUDA " + count_of(visible, "GPU") + ": ask for fewer, or run on a machine with more";
    const std::string shown = visible_devices_text(visible, cuda_visible_devices);
    switch (visible_devices_case(visible, cuda_visible_devices)) {
        case VisibleDevices::mig_instances:
            return shown + ": run the multi-GPU lessons on whole GPUs";
        case VisibleDevices::list_cut_short:
            return shown + " (nvidia-smi -L lists the machine's GPUs): correct the list, or ask for fewer";
        case VisibleDevices::shown:
            break;
    }
    return shown + ": name more GPUs there, or ask for fewer";
}

}  // namespace fwi
