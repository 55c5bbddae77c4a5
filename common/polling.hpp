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

// A pause for poll_until_done, for waits that usually end soon: for the first `spin_seconds` of the wait it
// only yields, so that the wait ends within a poll of what it waits for (as CUDA's own spinning waits do);
// after that it sleeps 0.1 ms between polls, so that a long wait ends at most about 0.1 ms late instead of
// keeping a core busy all the time.
std::function<void()> spin_then_sleep(double spin_seconds);

// `now`, less the time the process did not run: read between the polls of a wait, it advances by at most
// `longest_step` seconds from one reading to the next, so a larger step (the process stopped in a debugger,
// by Ctrl-Z, in a suspended machine) does not count against the wait's limit. For waits whose polls follow
// each other far more closely than `longest_step`.
std::function<double()> clock_without_stops(std::function<double()> now, double longest_step);

}  // namespace fwi
