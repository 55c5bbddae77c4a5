// NCCL_CHECK(call): throws fwi::EnvironmentError naming the call, file, line and NCCL's error string.
// ncclInProgress is not an error: non-blocking communicators return it until an operation completes,
// and the caller polls ncclCommGetAsyncError (nccl_comm.hpp).
#pragma once

#include <nccl.h>

#include <string>

#include "errors.hpp"

#define NCCL_CHECK(call)                                                                                             \
    do {                                                                                                             \
        const ncclResult_t nccl_check_status_ = (call);                                                              \
        if (nccl_check_status_ != ncclSuccess && nccl_check_status_ != ncclInProgress)                               \
            throw ::fwi::EnvironmentError(std::string("NCCL call `") + #call + "` failed at " + __FILE__ + ":" +     \
                                          std::to_string(__LINE__) + ": " + ncclGetErrorString(nccl_check_status_)); \
    } while (0)
