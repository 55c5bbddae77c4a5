#include "polling.hpp"

#include <algorithm>
#include <chrono>
#include <thread>

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

std::function<double()> clock_without_stops(std::function<double()> now, double longest_step) {
    const double first = now();
    return [now = std::move(now), longest_step, last = first, counted = 0.0]() mutable {
        const double reading = now();
        counted += std::min(reading - last, longest_step);
        last = reading;
        return counted;
    };
}

double steady_seconds() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::function<void()> spin_then_sleep(double spin_seconds) {
    return [spin_seconds, start = steady_seconds()] {
        if (steady_seconds() - start < spin_seconds)
            std::this_thread::yield();
        else
            std::this_thread::sleep_for(std::chrono::microseconds(100));
    };
}

}  // namespace fwi
