// Waiting with a deadline for something that can only be polled (an NCCL operation, a child process),
// separated from what is polled so that it can be tested without a GPU or a clock.
#pragma once

#include <functional>

namespace fwi {

enum class PollStatus { done, pending, failed };
enum class WaitOutcome { done, failed, timed_out };

// Calls poll() until it reports done or failed, or until now() has advanced timeout_s past its first
// value; pause() runs between polls. The real clock is steady_seconds.
WaitOutcome poll_until_done(const std::function<PollStatus()>& poll, double timeout_s,
                            const std::function<double()>& now, const std::function<void()>& pause);

// Seconds on a steady clock (from an arbitrary start).
double steady_seconds();

}  // namespace fwi
