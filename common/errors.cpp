#include "errors.hpp"

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <iostream>
#include <memory>
#include <new>
#include <thread>

namespace fwi {

namespace {

std::atomic<bool> g_gpu_work_abandoned{false};
std::atomic<const char*> g_program_name{"program"};

// Prints `error`'s message on stderr as its kind wants it and returns its exit code.
int report_error(const char* program_name, std::exception_ptr error) {
    try {
        std::rethrow_exception(error);
    } catch (const UsageError& e) {
        std::fprintf(stderr, "%s: error: %s\n(run with --help for all flags and their ranges)\n", program_name,
                     e.what());
        return kExitBadInput;
    } catch (const EnvironmentError& e) {
        std::fprintf(stderr, "%s: environment: %s\n", program_name, e.what());
        return kExitEnvironment;
    } catch (const VerificationError& e) {
        std::fprintf(stderr, "%s: VERIFICATION FAILED: %s\n", program_name, e.what());
        return kExitVerificationFailed;
    } catch (const std::bad_alloc& e) {
        // Host memory (std::bad_alloc) or, from Thrust, device memory: what() tells them apart.
        std::fprintf(
            stderr,
            "%s: environment: an allocation failed (%s): the run needs more memory than this process may have; make "
            "the run smaller, or raise the memory limit (ulimit -v, a container's or job's limit)\n",
            program_name, e.what());
        return kExitEnvironment;
    } catch (const std::exception& e) {
        // Anything else is a bug or an unexpected library failure; report it as an environment problem.
        std::fprintf(stderr, "%s: unexpected error: %s\n", program_name, e.what());
        return kExitEnvironment;
    } catch (...) {
        std::fprintf(stderr, "%s: unexpected error (not a std::exception)\n", program_name);
        return kExitEnvironment;
    }
}

}  // namespace

void ignore_broken_pipes() { std::signal(SIGPIPE, SIG_IGN); }

void abandon_gpu_work() { g_gpu_work_abandoned = true; }

bool gpu_work_abandoned() { return g_gpu_work_abandoned; }

void end_process_now(int code) {
    // Flushing can block for good: standard output may be a pipe whose reader stopped, or its lock held by
    // a thread blocked writing to one. So another thread flushes, and the process ends when it is done or
    // after a few seconds, whichever comes first.
    constexpr auto kFlushLimit = std::chrono::seconds(3);
    try {
        const auto flushed = std::make_shared<std::promise<void>>();
        std::future<void> done = flushed->get_future();
        std::thread([flushed] {
            std::fflush(stdout);
            std::fflush(stderr);
            flushed->set_value();
        }).detach();
        done.wait_for(kFlushLimit);
    } catch (const std::exception&) {  // no thread to flush with: flushed here
        std::fflush(stdout);
        std::fflush(stderr);
    }
    std::_Exit(code);
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
    std::fflush(stdout);
    const int code = report_error(program_name, error);
    std::fprintf(stderr, "%s: %s\n", program_name, note.c_str());
    end_process_now(code);
}

int run_program(const char* program_name, const std::function<int()>& body) {
    ignore_broken_pipes();
    set_running_program_name(program_name);
    int code = kExitOk;
    try {
        code = body();
    } catch (...) {
        code = report_error(program_name, std::current_exception());
    }
    return finish_program(check_output_written(program_name, code));
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
