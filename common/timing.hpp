// Timers: a host clock for whole steps, and the median of repetitions (CUDA events for device work are
// in cuda_timing.hpp).
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

namespace fwi {

class HostTimer {
public:
    HostTimer() : start_(Clock::now()) {}
    void restart() { start_ = Clock::now(); }
    double seconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

private:
    using Clock = std::chrono::steady_clock;
    Clock::time_point start_;
};

// Seconds since the last lap (or construction): one phase after another, each timed from where the last ended.
class LapTimer {
public:
    double lap() {
        const double now = timer_.seconds(), lap = now - last_;
        last_ = now;
        return lap;
    }

private:
    HostTimer timer_;
    double last_ = 0.0;
};

// Median of a non-empty set of samples (the mean of the two middle ones for an even count).
inline double median(std::vector<double> samples) {
    std::sort(samples.begin(), samples.end());
    const size_t n = samples.size();
    return n % 2 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
}

}  // namespace fwi
