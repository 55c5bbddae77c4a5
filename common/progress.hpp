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
    // `what` names the loop ("CPU reference, observed traces"), `unit` what it counts ("shots").
    ProgressReport(std::string what, std::string unit, int total, double interval_seconds = 30.0);
    // `done` of the total are done: prints the line on stdout if one is due.
    void done(int done);
    // The line due after `elapsed_seconds` with `done` done, if any (done() with the clock given).
    std::optional<std::string> line_at(int done, double elapsed_seconds);

private:
    std::string what_, unit_;
    int total_;
    double interval_, last_line_ = 0.0;
    std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// "45 s", "3 min 20 s", "2 h 5 min".
std::string format_duration(double seconds);

}  // namespace fwi
