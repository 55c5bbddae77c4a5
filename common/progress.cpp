#include "progress.hpp"

#include <cmath>
#include <cstdio>

namespace fwi {

ProgressReport::ProgressReport(std::string what, double total, double interval_seconds)
    : what_(std::move(what)), total_(total), interval_(interval_seconds) {}

void ProgressReport::done(double done, const std::string& state) {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    if (const auto line = line_at(done, state, elapsed)) {
        std::printf("%s\n", line->c_str());
        std::fflush(stdout);  // seen now, also through a pipe
    }
}

std::optional<std::string> ProgressReport::line_at(double done, const std::string& state, double elapsed_seconds) {
    if (done <= 0.0 || elapsed_seconds < last_line_ + interval_) return std::nullopt;
    last_line_ = elapsed_seconds;
    std::string line = "  " + what_ + ": " + state + " after " + format_duration(elapsed_seconds);
    if (done < total_) line += ", about " + format_duration(elapsed_seconds / done * (total_ - done)) + " left";
    return line;
}

std::string format_duration(double seconds) {
    const long s = std::lround(seconds);
    if (s < 60) return std::to_string(s) + " s";
    if (s < 3600) return std::to_string(s / 60) + " min " + std::to_string(s % 60) + " s";
    return std::to_string(s / 3600) + " h " + std::to_string(s % 3600 / 60) + " min";
}

}  // namespace fwi
