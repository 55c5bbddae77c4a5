#include "errors.hpp"

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <iostream>
#include <memory>
#include <mutex>
#include <new>
#include <system_error>
#include <thread>
#include <utility>

namespace fwi {

namespace {

std::atomic<bool> g_gpu_work_abandoned{false};
std::atomic<const char*> g_program_name{"program"};

// `error`'s message as its kind wants it (lines ending in a newline) and its exit code.
std::pair<int, std::string> describe_error(const char* program_name, std::exception_ptr error) {
    const std::string name = program_name;
    try {
        std::rethrow_exception(error);
    } catch (const BadSettingError& e) {
        return {kExitBadInput, name + ": error: " + e.what() + "\n"};
    } catch (const UsageError& e) {
        return {kExitBadInput, name + ": error: " + e.what() + "\n(run with --help for all flags and their ranges)\n"};
    } catch (const EnvironmentError& e) {
        return {kExitEnvironment, name + ": environment: " + e.what() + "\n"};
    } catch (const VerificationError& e) {
        return {kExitVerificationFailed, name + ": VERIFICATION FAILED: " + e.what() + "\n"};
    } catch (const std::bad_alloc& e) {
        // Host memory (std::bad_alloc) or, from Thrust, device memory: what() tells them apart.
        return {kExitEnvironment,
                name + ": environment: an allocation failed (" + e.what() +
                    "): the run needs more memory than this process may have; make the run smaller, or raise the "
                    "memory limit (ulimit -v, a container's or job's limit)\n"};
    } catch (const std::exception& e) {
        // Anything else is a bug or an unexpected library failure; report it as an environment problem.
        return {kExitEnvironment, name + ": unexpected error: " + e.what() + "\n"};
    } catch (...) {
        return {kExitEnvironment, name + ": unexpected error (not a std::exception)\n"};
    }
}

// Prints `error`'s message on stderr and returns its exit code.
int report_error(const char* program_name, std::exception_ptr error) {
    const auto [code, message] = describe_error(program_name, error);
    std::fputs(message.c_str(), stderr);
    return code;
}

}  // namespace

void ignore_broken_pipes() { std::signal(SIGPIPE, SIG_IGN); }

void abandon_gpu_work() { g_gpu_work_abandoned = true; }

bool gpu_work_abandoned() { return g_gpu_work_abandoned; }

namespace {
std::atomic<void (*)()> g_sudden_end_cleanup{nullptr};
}  // namespace

void set_sudden_end_cleanup(void (*cleanup)()) { g_sudden_end_cleanup = cleanup; }

void end_process_now(int code, const std::string& last_words) {
    if (void (*cleanup)() = g_sudden_end_cleanup.exchange(nullptr)) cleanup();
    // Writing can block for good: standard output or error may be a pipe whose reader stopped, or its lock
    // held by a thread blocked writing to one. So another thread writes and flushes, and the process ends
    // when it is done or after a few seconds, whichever comes first.
    constexpr auto kWriteLimit = std::chrono::seconds(3);
    const auto write_and_flush = [last_words] {
        std::fputs(last_words.c_str(), stderr);
        std::fflush(stdout);
        std::fflush(stderr);
    };
    try {
        const auto written = std::make_shared<std::promise<void>>();
        std::future<void> done = written->get_future();
        std::thread([written, write_and_flush] {
            write_and_flush();
            written->set_value();
        }).detach();
        done.wait_for(kWriteLimit);
    } catch (const std::exception&) {  // no thread to write with: written here
        write_and_flush();
    }
    std::_Exit(code);
}

void end_process_if_late(double limit_s, const std::string& message_if_late, const std::function<void()>& call,
                         int code) {
    // Shared with the watcher, which outlives this call when `call` hangs.
    struct Watch {
        std::mutex mutex;
        std::condition_variable finished;
        bool done = false;
    };
    const auto watch = std::make_shared<Watch>();
    try {
        std::thread([watch, limit_s, message_if_late, code] {
            std::unique_lock<std::mutex> lock(watch->mutex);
            if (watch->finished.wait_for(lock, std::chrono::duration<double>(limit_s), [&] { return watch->done; }))
                return;
            end_process_now(code, message_if_late);
        }).detach();
    } catch (const std::system_error&) {  // no thread to watch with
        call();
        return;
    }
    struct Returned {  // also when `call` throws
        Watch& watch;
        ~Returned() {
            {
                const std::lock_guard<std::mutex> lock(watch.mutex);
                watch.done = true;
            }
            watch.finished.notify_one();
        }
    } returned{*watch};
    call();
}

int finish_program(int code) {
    if (!gpu_work_abandoned()) return code;
    end_process_now(code);
}

const char* running_program_name() { return g_program_name; }

void set_running_program_name(const char* name) { g_program_name = name; }

void print_warning(const std::string& text) {
    std::fprintf(stderr, "%s: warning: %s\n", running_program_name(), text.c_str());
}

void print_note(const std::string& text) {
    std::fprintf(stderr, "%s: note: %s\n", running_program_name(), text.c_str());
}

void exit_at_once(std::exception_ptr error, const std::string& note) {
    const char* program_name = running_program_name();
    const auto [code, message] = describe_error(program_name, error);
    end_process_now(code, message + program_name + ": " + note + "\n");
}

int run_and_report(const char* program_name, const std::function<int()>& body) {
    ignore_broken_pipes();
    set_running_program_name(program_name);
    int code = kExitOk;
    try {
        gpu_work_base_seconds();
        file_write_base_seconds();
        code = body();
    } catch (...) {
        code = report_error(program_name, std::current_exception());
    }
    return check_output_written(program_name, code);
}

int run_program(const char* program_name, const std::function<int()>& body) {
    return finish_program(run_and_report(program_name, body));
}

bool standard_output_lost() {
    std::cout.flush();
    return !std::cout || std::fflush(stdout) != 0 || std::ferror(stdout);
}

int check_output_written(const char* program_name, int code) {
    // A run whose output could not all be written lost lines and its RESULT: no success, as a help text
    // that cannot be written is none (cli.cpp).
    if (code != kExitOk || !standard_output_lost()) return code;
    std::fprintf(stderr,
                 "%s: environment: standard output could not be written (closed, on a full disk, or a pipe whose "
                 "reader has gone): what the run printed is lost\n",
                 program_name);
    return kExitEnvironment;
}

std::string format_number(double value) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", value);
    return text;
}

std::string format_seconds(double seconds) { return format_number(std::round(seconds * 10.0) / 10.0); }

std::string format_at_most(double value) {
    std::string text = format_number(value);
    // %g rounds to the nearest six-digit number, at most half a unit of its last digit (5e-6 of the value)
    // above it: step down by 1e-6 of the value until the text reads back no larger (a few steps; the bound
    // of 20 only matters where the step is too small to count, as on a denormal).
    for (int step = 1; step <= 20 && std::isfinite(value) && std::strtod(text.c_str(), nullptr) > value; ++step)
        text = format_number(value - step * std::fabs(value) * 1e-6);
    return text;
}

double gib(size_t bytes) { return double(bytes) / (1024.0 * 1024.0 * 1024.0); }

namespace {
double test_limit_seconds(const char* variable, double normal_s, double least_s, const std::string& what) {
    const char* text = std::getenv(variable);
    if (!text) return normal_s;
    char* end = nullptr;
    const double value = std::strtod(text, &end);
    if (end == text || *end != '\0' || !(value >= least_s && value <= normal_s))
        throw BadSettingError(std::string(variable) + ": '" + shown_value(text) + "' is not a number of seconds from " +
                              format_number(least_s) + " to " + format_number(normal_s) +
                              " (unset it outside the tests)");
    print_warning(std::string(variable) + "=" + format_number(value) + " is set, a test setting: the limit on " + what +
                  " starts from " + format_number(value) + " s, not " + format_number(normal_s) +
                  " s (unset it outside the tests)");
    return value;
}
}  // namespace

double gpu_work_base_seconds() {
    static const double base = test_limit_seconds("FWI_TEST_GPU_WORK_BASE_S", 60.0, 0.1, "GPU waits");
    return base;
}

double file_write_base_seconds() {
    static const double base = test_limit_seconds("FWI_TEST_FILE_WRITE_BASE_S", 120.0, 0.1, "file writes");
    return base;
}

std::string count_of(long long count, const std::string& noun) {
    return std::to_string(count) + " " + noun + (count == 1 ? "" : "s");
}

namespace {

std::string escaped_control_characters(const std::string& text, size_t longest) {
    std::string out;
    for (size_t i = 0; i < text.size() && i < longest; ++i) {
        const unsigned char c = static_cast<unsigned char>(text[i]);
        if (c >= 0x20 && c != 0x7f) {
            out += char(c);
        } else {
            char escaped[8];
            std::snprintf(escaped, sizeof escaped, "\\x%02x", c);
            out += escaped;
        }
    }
    if (text.size() > longest) out += "... (" + std::to_string(text.size()) + " characters)";
    return out;
}

}  // namespace

std::string shown_value(const std::string& text) { return escaped_control_characters(text, 80); }

std::string shown_path(const std::string& path) { return escaped_control_characters(path, path.size()); }

}  // namespace fwi
