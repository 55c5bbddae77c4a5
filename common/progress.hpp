// Progress of a long loop on the CPU (the CPU reference of 01 --verify works one shot at a time on one
// core: minutes for the default problem, over an hour for the large one). At most one line every
// `interval` seconds and none before the first interval has passed, so a loop that ends within it prints
// nothing and short runs keep their output.
#pragma once

#include <chrono>
#include <optional>
#include <string>

namespace fwi {

class ProgressReport {
public:
    // `what` names the loop ("CPU reference"); `total` is its work, in any unit (shots weighted by their cost).
    ProgressReport(std::string what, double total, double interval_seconds = 30.0);
    // `done` of the total is done, and `state` says what ("traces of 3 of 8 shots"): prints the line on
    // stdout if one is due, with the time so far and an estimate of the time left.
    void done(double done, const std::string& state);
    // The line due after `elapsed_seconds`, if any (done() with the clock given).
    std::optional<std::string> line_at(double done, const std::string& state, double elapsed_seconds);

private:
    std::string what_;
    double total_, interval_, last_line_ = 0.0;
    std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// "45 s", "3 min 20 s", "2 h 5 min".
std::string format_duration(double seconds);

}  // namespace fwi
