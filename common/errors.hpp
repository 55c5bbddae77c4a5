// Error kinds and the exit codes they map to (docs/ARCHITECTURE.md, "Exit codes"):
//   0 ok, 1 verification failed, 2 bad input, 3 environment (no GPU, NCCL/MPI failure, timeout);
// and how their messages show numbers.
#pragma once

#include <cstddef>
#include <exception>
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

// Where a failed call is, for the *_CHECK macros' messages: the source file's name and the line
// ("nccl_comm.cpp:284"), not the whole path it had on the machine that built it.
inline std::string source_line_text(const char* file, int line) {
    const std::string path = file;
    return path.substr(path.find_last_of('/') + 1) + ":" + std::to_string(line);
}

// Bad command-line input: the message names the flag and the allowed range.
struct UsageError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// Bad input that is not a command-line flag (an environment variable, how the program was launched): exit 2
// as for a flag, without the hint to --help, which lists no such thing.
struct BadSettingError : UsageError {
    using UsageError::UsageError;
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

// The GPU chosen for this process cannot be taken: another process holds it in exclusive-process compute
// mode (another rank of the job, or someone else's). An EnvironmentError that a check can report and go on.
struct GpuUnavailableError : EnvironmentError {
    using EnvironmentError::EnvironmentError;
};

// A result did not match its reference.
struct VerificationError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// Runs a program body and turns the error kinds above into a message on stderr and the exit code. A body
// that succeeded but whose standard output could not be written (closed, a full disk, a pipe whose reader
// has gone: see ignore_broken_pipes) exits 3. After abandon_gpu_work, the process ends with that code at
// once (std::_Exit) instead of returning it.
int run_program(const char* program_name, const std::function<int()>& body);
// run_program without its last step (finish_program): the exit code, returned even after abandon_gpu_work.
// For run_mpi_program, which must first end the other ranks (MPI_Abort) where this one failed.
int run_and_report(const char* program_name, const std::function<int()>& body);
// `code`, or 3 with a message on stderr when `code` is 0 but standard output could not all be written
// (closed, a full disk, a pipe whose reader has gone). run_program ends with it; so do mains that do not
// use run_program.
int check_output_written(const char* program_name, int code);
// Flushes standard output, the C stream and the C++ one (Google Benchmark's): true when some of what was
// written to it is lost (errno then says why). check_output_written's test.
bool standard_output_lost();
// The name run_program was given ("05_nccl_mpi (rank 1)"), for messages printed outside its error
// reporting, such as a watcher thread's; "program" before run_program starts. A main that does not use
// run_program names itself with set_running_program_name (`name` must outlive the process's messages).
const char* running_program_name();
void set_running_program_name(const char* name);
// A warning or a note on stderr, in the program's name as its errors are: "01_single_gpu: warning: text".
void print_warning(const std::string& text);
void print_note(const std::string& text);

// A write to a pipe whose reader has gone (`program | head`) fails instead of killing the process with
// SIGPIPE, which would end it without a message or an exit code of the suite's.
void ignore_broken_pipes();

// For GPU work that may never finish (a kernel or copy past its time limit): from now on run_program ends
// the process right after its message, with std::_Exit, since a normal exit tears down the CUDA runtime,
// which waits for that work forever. Freeing device memory waits for it too: skip it when this is set.
void abandon_gpu_work();
bool gpu_work_abandoned();
// A program's last step: after abandon_gpu_work, flushes its output and ends the process with `code` at
// once (std::_Exit); else returns `code`. run_program ends with it; so do mains that do not use run_program.
int finish_program(int code);

// Writes `last_words` (whole lines) on stderr, flushes standard output and error and ends the process with
// `code` at once (std::_Exit): no destructor, no atexit handler, no CUDA runtime teardown runs, so nothing
// can wait on stuck GPU work or another rank. A write that blocks (a pipe whose reader stopped) gets 3 s;
// then the process ends without it.
[[noreturn]] void end_process_now(int code, const std::string& last_words = "");
// A function end_process_now calls first, to remove what a destructor would have (doctor's NCCL log), or
// nullptr for none. It may be called from a signal handler as well: only async-signal-safe calls in it.
void set_sudden_end_cleanup(void (*cleanup)());

// Runs `call`, which cannot be polled or interrupted and may never return (NCCL's abort, finalize and
// destroy; MPI_Init, MPI_Abort). If it has not returned `limit_s` after it began, a watcher thread ends the
// process at once (end_process_now, with `code`) with `message_if_late` (whole lines); the watcher outlives
// a call that hangs, and exits when one returns in time. Where no thread can be started, `call` runs
// without a limit.
void end_process_if_late(double limit_s, const std::string& message_if_late, const std::function<void()>& call,
                         int code = kExitEnvironment);

// For a thread that may be stuck in a CUDA call, which nothing can interrupt: reports `error` as
// run_program would, then `note` on a line of its own, and ends the process at once with the error's exit
// code (std::_Exit), without unwinding, whose destructors would free device memory and wait on that call.
[[noreturn]] void exit_at_once(std::exception_ptr error, const std::string& note);

// Numbers in messages. A double as every message (and --help's ranges and defaults) shows it: printf's
// %g, six significant digits without trailing zeros ("3000", "1.5992", "0.0001", "1e-06"), not
// std::to_string's six decimals. A size in GiB (2^30 bytes), for "%.1f GiB".
std::string format_number(double value);
// The same for a limit a message suggests ("--dt at most X"): the six-digit text nearest below `value`
// where format_number would round up, so that the value suggested is never refused itself.
std::string format_at_most(double value);
// A computed time limit in seconds, to a tenth ("10", "27.3"), not rounded to whole seconds ("1.5", not "2").
std::string format_seconds(double seconds);
double gib(size_t bytes);
// The bases of the suite's limits on its waits for GPU work (a minute) and on a file's write (two minutes),
// which the tests of a GPU or a file system that hangs shorten through FWI_TEST_GPU_WORK_BASE_S and
// FWI_TEST_FILE_WRITE_BASE_S: from 0.1 s to the normal base, with a warning that names the variable (set by
// accident, it would report healthy work as stuck). Read once; run_and_report (and the benchmarks' main) reads
// both before the program's body, so that any other value is refused (BadSettingError, exit 2) before any
// work, --help included, not at the first wait or write after it; every program then warns that one is set,
// visible_gpus too.
double gpu_work_base_seconds();
double file_write_base_seconds();
// A count and its noun, plural where it is not 1: count_of(1, "shot") is "1 shot", count_of(3, "rank") "3 ranks".
std::string count_of(long long count, const std::string& noun);

// Text from outside (a value from the command line, a path) as a message shows it: control characters
// escaped, since a newline or an escape sequence would break the line or reach the terminal. A value is
// cut after 80 characters ("... (N characters)" after them); a path is shown whole, as a cut one could not
// be found.
std::string shown_value(const std::string& text);
std::string shown_path(const std::string& path);

}  // namespace fwi
