#include "errors.hpp"

#include <cstdio>
#include <new>

namespace fwi {

int run_program(const char* program_name, const std::function<int()>& body) {
    try {
        return body();
    } catch (const UsageError& e) {
        std::fprintf(stderr, "%s: error: %s\n(run with --help for all flags and their ranges)\n",
                     program_name, e.what());
        return kExitBadInput;
    } catch (const EnvironmentError& e) {
        std::fprintf(stderr, "%s: environment: %s\n", program_name, e.what());
        return kExitEnvironment;
    } catch (const VerificationError& e) {
        std::fprintf(stderr, "%s: VERIFICATION FAILED: %s\n", program_name, e.what());
        return kExitVerificationFailed;
    } catch (const std::bad_alloc& e) {
        // Host memory (std::bad_alloc) or, from Thrust, device memory: what() tells them apart.
        std::fprintf(stderr,
                     "%s: environment: an allocation failed (%s): the run needs more memory than this process "
                     "may have; make the run smaller, or raise the memory limit (ulimit -v, a container's or "
                     "job's limit)\n",
                     program_name, e.what());
        return kExitEnvironment;
    } catch (const std::exception& e) {
        // Anything else is a bug or an unexpected library failure; report it as an environment problem.
        std::fprintf(stderr, "%s: unexpected error: %s\n", program_name, e.what());
        return kExitEnvironment;
    }
}

std::string format_number(double value) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", value);
    return text;
}

double gib(size_t bytes) { return double(bytes) / (1024.0 * 1024.0 * 1024.0); }

}  // namespace fwi
