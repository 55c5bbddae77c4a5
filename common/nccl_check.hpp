// NCCL_CHECK(call): throws fwi::EnvironmentError naming the call, file, line and nccl_error_text.
// ncclInProgress is not an error: non-blocking communicators return it until an operation completes,
// and the caller polls ncclCommGetAsyncError (nccl_comm.hpp).
#pragma once

#include <nccl.h>

#include <string>

#include "errors.hpp"

namespace fwi {

// NCCL's error string for `status`, and after it NCCL's own last message (of `comm`, or of this thread for
// none) where there is one: the strings are generic ("invalid usage"), the message says what went wrong
// ("Bootstrap : no socket interface found").
inline std::string nccl_error_text(ncclResult_t status, ncclComm_t comm = nullptr) {
    const char* last = ncclGetLastError(comm);
    return std::string(ncclGetErrorString(status)) + (last && *last ? std::string(": ") + last : "");
}

}  // namespace fwi

#define NCCL_CHECK(call)                                                                                         \
    do {                                                                                                         \
        const ncclResult_t nccl_check_status_ = (call);                                                          \
        if (nccl_check_status_ != ncclSuccess && nccl_check_status_ != ncclInProgress)                           \
            throw ::fwi::EnvironmentError(std::string("NCCL call `") + #call + "` failed at " + __FILE__ + ":" + \
                                          std::to_string(__LINE__) + ": " +                                      \
                                          ::fwi::nccl_error_text(nccl_check_status_));                           \
    } while (0)
