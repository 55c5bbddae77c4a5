// NCCL_CHECK(call): throws fwi::EnvironmentError naming the call, file, line and nccl_error_text.
// ncclInProgress is not an error: non-blocking communicators return it until an operation completes,
// and the caller polls ncclCommGetAsyncError (nccl_comm.hpp).
#pragma once

#include <nccl.h>

#include <mutex>
#include <string>

#include "errors.hpp"

namespace fwi {

// NCCL keeps one last warning for the whole process: ncclGetLastError ignores its communicator and nothing
// clears the text. So a warning can be old, left by a call that then succeeded. The suite calls
// nccl_warnings_so_far_succeeded after every NCCL wait that ended well (wait_for_nccl), and a failure's text
// names NCCL's last warning only when it is a newer one. The baseline is each thread's own, so that in 04 one
// GPU's thread succeeding does not hide the warning of another's failure; a thread's baseline starts, at its
// first NCCL success or failure, from the latest success of any thread (04's threads start after the main
// thread made the communicators, whose warnings are old by then).
namespace detail {
struct NcclWarningAtSuccess {
    std::mutex mutex;
    std::string text;  // the last warning at the latest success of any thread
};
inline NcclWarningAtSuccess& nccl_warning_at_any_success() {
    static NcclWarningAtSuccess latest;
    return latest;
}
inline std::string& nccl_warning_at_last_success() {
    thread_local std::string text = [] {
        NcclWarningAtSuccess& latest = nccl_warning_at_any_success();
        const std::lock_guard<std::mutex> lock(latest.mutex);
        return latest.text;
    }();
    return text;
}
inline std::string nccl_last_warning() {
    const char* last = ncclGetLastError(nullptr);
    return last ? last : "";
}
}  // namespace detail

inline void nccl_warnings_so_far_succeeded() {
    const std::string last = detail::nccl_last_warning();
    detail::nccl_warning_at_last_success() = last;
    detail::NcclWarningAtSuccess& latest = detail::nccl_warning_at_any_success();
    const std::lock_guard<std::mutex> lock(latest.mutex);
    latest.text = last;
}

// NCCL's error string for `status`, and after it NCCL's last warning where one came since this thread's
// latest success: the strings are generic ("invalid usage"), the warning says what went wrong ("Bootstrap :
// no socket interface found").
inline std::string nccl_error_text(ncclResult_t status) {
    const std::string last = detail::nccl_last_warning();
    const bool newer = !last.empty() && last != detail::nccl_warning_at_last_success();
    return std::string(ncclGetErrorString(status)) + (newer ? " (NCCL's last warning: " + last + ")" : "");
}

}  // namespace fwi

#define NCCL_CHECK(call)                                                                        \
    do {                                                                                        \
        const ncclResult_t nccl_check_status_ = (call);                                         \
        if (nccl_check_status_ != ncclSuccess && nccl_check_status_ != ncclInProgress)          \
            throw ::fwi::EnvironmentError(std::string("NCCL call `") + #call + "` failed at " + \
                                          ::fwi::source_line_text(__FILE__, __LINE__) + ": " +  \
                                          ::fwi::nccl_error_text(nccl_check_status_));          \
    } while (0)
