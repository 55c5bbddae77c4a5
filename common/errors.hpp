// Error kinds and the exit codes they map to (docs/ARCHITECTURE.md, "Exit codes"):
//   0 ok, 1 verification failed, 2 bad input, 3 environment (no GPU, NCCL/MPI failure, timeout);
// and how their messages show numbers.
#pragma once

#include <cstddef>
#include <functional>
#include <stdexcept>
#include <string>

namespace fwi {

enum ExitCode : int {
    kExitOk = 0,
    kExitVerificationFailed = 1,
    kExitBadInput = 2,
    kExitEnvironment = 3,
    kExitSkipped = 77,  // a test that cannot run here (too few GPUs): CTest's SKIP_RETURN_CODE
};

// Bad command-line input: the message names the flag and the allowed range.
struct UsageError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// The machine cannot run this: no GPU, not enough memory, a library failure. The message gives a hint.
struct EnvironmentError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// The GPU has not the memory asked for: an allocation failed (cudaErrorMemoryAllocation), or a run was
// refused before allocating what cannot fit. An EnvironmentError that code able to make do with less, or
// to leave that part out, can catch.
struct DeviceMemoryError : EnvironmentError {
    using EnvironmentError::EnvironmentError;
};

// A result did not match its reference.
struct VerificationError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// Runs a program body and turns the error kinds above into a message on stderr and the exit code. A body
// that succeeded but whose standard output could not be written (closed, a full disk) exits 3.
int run_program(const char* program_name, const std::function<int()>& body);

// Numbers in messages. A double as every message (and --help's ranges and defaults) shows it: printf's
// %g, six significant digits without trailing zeros ("3000", "1.5992", "0.0001", "1e-06"), not
// std::to_string's six decimals. A size in GiB (2^30 bytes), for "%.1f GiB".
std::string format_number(double value);
double gib(size_t bytes);

}  // namespace fwi
