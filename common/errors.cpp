#include "errors.hpp"

#include <cstdio>
#include <new>

namespace fwi {

namespace {

int run_reporting_errors(const char* program_name, const std::function<int()>& body) {
    try {
        return body();
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
    }
}

}  // namespace

int run_program(const char* program_name, const std::function<int()>& body) {
    const int code = run_reporting_errors(program_name, body);
    // A run whose output could not all be written (standard output closed, or on a full disk) lost lines
    // and its RESULT: no success, as a help text that cannot be written is none (cli.cpp).
    if (code == kExitOk && (std::fflush(stdout) != 0 || std::ferror(stdout))) {
        std::fprintf(stderr,
                     "%s: environment: standard output could not be written (closed, or on a full disk): what the run "
                     "printed is lost\n",
                     program_name);
        return kExitEnvironment;
    }
    return code;
}

std::string format_number(double value) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", value);
    return text;
}

double gib(size_t bytes) { return double(bytes) / (1024.0 * 1024.0 * 1024.0); }

}  // namespace fwi
