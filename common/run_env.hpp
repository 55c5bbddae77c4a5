// The `env` object at the end of every RESULT (docs/RESULT.md): on which machine, with which build and
// which libraries a figure was measured, so that results from different runs can be compared knowingly.
//
// All of it lives in fwi_core, which links neither the CUDA runtime nor NCCL nor MPI, so that every
// program that prints a RESULT reports the same env whatever it links (CPU-only tests, programs on the
// CUDA runtime alone, the MPI and NCCL lessons), with no registration to forget:
//   - the GPUs, their links and the driver come from the CUDA driver API and NVML, both loaded at run time
//     with dlopen (as NCCL does): without a driver, or with no GPU visible, gpus is [] and gpu_count 0;
//   - the NCCL and MPI versions are set by the code that starts those libraries (nccl_comm.cpp,
//     mpi_env.cpp) through set_env_field, so a program that does not use them reports null.
#pragma once

#include <string>
#include <vector>

#include "output.hpp"

namespace fwi {

// The env object, its fields in the order of docs/RESULT.md. The machine and build facts are collected
// at the first call and kept (they do not change during a run); utc_time, the fields set with
// set_env_field and the NCCL_* variables are read at every call (NCCL sets some of those as it starts).
// Never throws for lack of a GPU or driver; thread-safe.
JsonObject run_env_json();

// Sets a field of the env of every later RESULT, e.g. set_env_field("nccl_version", "2.28.3").
// nccl_version and mpi_library_version are null until set; other keys go after them, in the order set.
void set_env_field(const std::string& key, const JsonValue& value);

// The CUDA architectures this build was made for, CMake's list comma-separated: "80-real,90-real,90-virtual".
std::string build_cuda_architectures();

// The suite's changes to its own environment and its reads of the whole of it go through these, under one
// lock: a thread that writes a report (doctor's watchdog, run_env_json's NCCL_* variables) may read the
// environment while the main thread sets a variable, which setenv and a walk of `environ` alone make
// undefined behaviour. (NCCL itself reads variables with getenv, and sets those of an nccl.conf at its
// first communicator, outside this lock; the suite sets NCCL's before making communicators.)
void set_environment_variable(const char* name, const char* value);
void unset_environment_variable(const char* name);
std::vector<std::string> environment_entries();  // every "NAME=value" of the process, in its order

// This machine's name (gethostname).
std::string host_name();

// 13000 -> "13.0", 12080 -> "12.8": the encoding of cuDriverGetVersion, cudaDriverGetVersion and
// cudaRuntimeGetVersion.
std::string cuda_version_text(int version);

}  // namespace fwi
