// How this process was launched: the variables that launchers set to the number of ranks they started,
// read without MPI, so that an MPI program can tell a mistaken launch (every process alone) and a program
// of one process can tell that mpirun started several copies of it.
#pragma once

#include <map>
#include <string>

namespace fwi {

// A launch that went wrong: MPI sees one rank (`mpi_world_size` 1) while the environment names more, so
// every process started alone. Returns the message (the variable, its value, who sets it and how to
// start the ranks instead), or "" when the launch is consistent. The variables: those of MPI launchers
// (OMPI_COMM_WORLD_SIZE: Open MPI; PMI_SIZE: MPICH/Intel MPI Hydra, srun --mpi=pmi2; MV2_COMM_WORLD_SIZE:
// MVAPICH), which are authoritative (one set to 1 means one rank on purpose, whatever the rest say), then
// SLURM_NTASKS and SLURM_NPROCS (Slurm) and WORLD_SIZE (torchrun). Throws BadSettingError when one it
// reads is set to anything but a rank count of 1 or more that MPI can count (an int: "abc", "-1", " 2",
// "0", 99999999999): a broken environment, refused as a flag's bad value is, not read as unset.
using LaunchEnvironment = std::map<std::string, std::string>;  // variable -> value, for those set
LaunchEnvironment launch_environment();                        // the variables above, from this process's environment
std::string launch_mismatch(int mpi_world_size, const LaunchEnvironment& environment);
// Whether an MPI launcher's variable above names more than one rank: "OMPI_COMM_WORLD_SIZE=2, set by Open MPI's
// mpirun", or "" (none set, or one rank on purpose). Only the MPI launchers' variables: a process that a job
// script runs once inside a Slurm allocation of several tasks is one process. Throws as launch_mismatch does.
// How a program that is not an MPI program sees that mpirun started several copies of it. srun --mpi=pmix
// sets none of these for a program that does not call MPI_Init, so srun's copies are not seen. (Its
// SLURM_STEP_NUM_TASKS cannot tell them either: a shell from `srun -n 4 --pty bash` inherits it, and every
// program started from that shell would be refused.)
std::string mpi_launcher_ranks(const LaunchEnvironment& environment);

// For a program of one process (01, 02, 04, doctor without --mpi, the benchmarks): throws UsageError when an
// MPI launcher started it as one of several ranks (mpi_launcher_ranks), each of which would run the whole
// program on the same GPUs. `instead` says how to run it ("run it without mpirun").
void refuse_launch_as_several_ranks(const std::string& instead);

// What CUDA_VISIBLE_DEVICES (set, to `cuda_visible_devices`) does where CUDA shows `shown` GPUs: "names MIG
// instances, and CUDA shows a process at most one of them", "=0,1,7 names 3, of which CUDA shows 2 GPUs: it
// stops at the first entry that names no GPU it can use", or "=0,1 shows 2 GPUs". doctor and
// too_few_gpus_hint word it alike.
std::string visible_devices_text(int shown, const std::string& cuda_visible_devices);

// Why a program that needs more GPUs than the `visible` (1 or more) it sees, given CUDA_VISIBLE_DEVICES
// (`cuda_visible_devices`, null when unset), sees no more: MIG instances named there (CUDA shows a process
// at most one), the variable's own list, or the machine's GPUs. Says what to do. (No GPU at all has other
// causes: device.cu's hint.)
std::string too_few_gpus_hint(int visible, const char* cuda_visible_devices);

}  // namespace fwi
