// MPI_CHECK(call): throws fwi::EnvironmentError naming the call, file, line and MPI's error string.
// MPI's default handler aborts on error; programs set MPI_ERRORS_RETURN so this check sees the code.
#pragma once

#include <mpi.h>

#include <string>

#include "errors.hpp"

namespace fwi {

[[noreturn]] inline void throw_mpi_error(int status, const char* call, const char* file, int line) {
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    MPI_Error_string(status, text, &length);
    throw EnvironmentError(std::string("MPI call `") + call + "` failed at " + source_line_text(file, line) + ": " +
                           std::string(text, length));
}

}  // namespace fwi

#define MPI_CHECK(call)                                                                                             \
    do {                                                                                                            \
        const int mpi_check_status_ = (call);                                                                       \
        if (mpi_check_status_ != MPI_SUCCESS) ::fwi::throw_mpi_error(mpi_check_status_, #call, __FILE__, __LINE__); \
    } while (0)
