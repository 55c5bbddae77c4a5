#include "polling.hpp"

#include <chrono>

namespace fwi {

WaitOutcome poll_until_done(const std::function<PollStatus()>& poll, double timeout_s,
                            const std::function<double()>& now, const std::function<void()>& pause) {
    const double start = now();
    for (;;) {
        const PollStatus status = poll();
        if (status == PollStatus::done) return WaitOutcome::done;
        if (status == PollStatus::failed) return WaitOutcome::failed;
        if (now() - start >= timeout_s) return WaitOutcome::timed_out;
        pause();
    }
}

double steady_seconds() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace fwi
