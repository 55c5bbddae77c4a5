#include "run_files.hpp"

#include <spawn.h>
#include <sys/wait.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <regex>
#include <thread>

#include "errors.hpp"
#include "output.hpp"
#include "polling.hpp"

extern char** environ;

namespace fwi {

std::string snapshot_file_name(int iteration) {
    char name[48];
    std::snprintf(name, sizeof name, "model_iter_%04d.npy", iteration);
    return name;
}

namespace {

struct Snapshot {
    std::string name;
    int iteration;
};

// The snapshots in DIR (none where it cannot be read); `error` says why a listing stopped.
std::vector<Snapshot> snapshots_in(const std::string& dir, std::error_code& error) {
    const std::regex snapshot(R"(model_iter_([0-9]+)\.npy)");
    std::vector<Snapshot> found;
    for (auto entry = std::filesystem::directory_iterator(dir, error);
         !error && entry != std::filesystem::directory_iterator(); entry.increment(error)) {
        std::smatch digits;
        const std::string name = entry->path().filename().string();
        // Digits past int's range (no run writes them) count as after any iteration.
        if (std::regex_match(name, digits, snapshot))
            found.push_back({name, digits[1].length() > 9 ? INT_MAX : std::stoi(digits[1])});
    }
    return found;
}

}  // namespace

std::vector<std::string> run_file_names(const std::string& dir) {
    std::vector<std::string> names{kCheckpointFileName, "true_model.npy",     "initial_model.npy",
                                   "final_model.npy",   "first_gradient.npy", "final_gradient.npy",
                                   "loss_history.csv",  "loss_history.json"};
    std::error_code unlisted;  // a folder that cannot be listed is refused where the run writes into it
    for (const Snapshot& snapshot : snapshots_in(dir, unlisted)) names.push_back(snapshot.name);
    return names;
}

void remove_snapshots_after(const std::string& dir, int iteration) {
    std::error_code error;
    const std::vector<Snapshot> snapshots = snapshots_in(dir, error);
    for (const Snapshot& snapshot : snapshots)
        if (!error && snapshot.iteration > iteration) std::filesystem::remove(dir + "/" + snapshot.name, error);
    if (error)
        throw EnvironmentError("--out: cannot remove the snapshots of another run from '" + shown_path(dir) +
                               "': " + error.message());
}

void write_loss_history(const std::string& dir, const FwiState& state) {
    std::vector<int> iterations;
    std::vector<double> relative;
    for (size_t i = 0; i < state.misfits.size(); ++i) {
        iterations.push_back(int(i) + 1);
        relative.push_back(state.misfits.front() > 0.0 ? state.misfits[i] / state.misfits.front() : 1.0);
    }
    std::string csv = "iteration,misfit,relative_misfit,iteration_seconds\n";
    for (size_t i = 0; i < iterations.size(); ++i) {
        // Sized by a first call: a resumed checkpoint may hold any finite value, and %f writes 1e300 in 301 digits.
        const auto print_row = [&](char* to, size_t size) {
            return std::snprintf(to, size, "%d,%.9e,%.9f,%.6f\n", iterations[i], state.misfits[i], relative[i],
                                 state.iteration_seconds[i]);
        };
        std::string row(size_t(print_row(nullptr, 0)), '\0');
        print_row(row.data(), row.size() + 1);
        csv += row;
    }
    write_file_atomically(dir + "/loss_history.csv", csv);
    const JsonObject history = JsonObject()
                                   .add("iteration", iterations)
                                   .add("misfit", state.misfits)
                                   .add("relative_misfit", relative)
                                   .add("iteration_seconds", state.iteration_seconds);
    write_file_atomically(dir + "/loss_history.json", history.str() + "\n");
}

std::string plot_script_path() {
    std::error_code error;
    const std::filesystem::path program = std::filesystem::read_symlink("/proc/self/exe", error);
    if (!error) {
        const std::filesystem::path installed =
            program.parent_path() / ".." / "share" / "multi_gpu_fwi" / "plot_fwi.py";
        if (std::filesystem::exists(installed, error)) return installed.lexically_normal().string();
    }
    return FWI_PLOT_SCRIPT;
}

bool draw_pictures(const std::string& script, const std::string& out_dir, double timeout_s) {
    // A folder named like a flag ("--help") would be read as one by the script.
    const std::string dir = out_dir.rfind('-', 0) == 0 ? "./" + out_dir : out_dir;
    const std::string by_hand = "python3 " + script + " " + dir;
    std::error_code unreadable;  // a folder this user cannot search reads as missing, not as an exception
    if (!std::filesystem::exists(script, unreadable)) {
        print_warning("the plotting script " + script + " is not there (was the source tree moved?): no PNG pictures");
        return false;
    }
    std::fflush(stdout);
    std::vector<std::string> words = {"python3", script, dir};
    std::vector<char*> argv;
    for (auto& word : words) argv.push_back(word.data());
    argv.push_back(nullptr);
    pid_t child = 0;
    if (const int error = posix_spawnp(&child, "python3", nullptr, nullptr, argv.data(), environ); error != 0) {
        print_warning("cannot start python3 (" + std::string(std::strerror(error)) +
                      "): no PNG pictures; make them later with: " + by_hand);
        return false;
    }
    int status = 0, wait_error = 0;
    const WaitOutcome outcome = poll_until_done(
        [&] {
            const pid_t done = waitpid(child, &status, WNOHANG);
            if (done == child) return PollStatus::done;
            if (done < 0 && errno != EINTR) {
                wait_error = errno;
                return PollStatus::failed;
            }
            return PollStatus::pending;
        },
        timeout_s, steady_seconds, [] { std::this_thread::sleep_for(std::chrono::milliseconds(50)); });
    if (outcome == WaitOutcome::failed) {
        print_warning("cannot wait for the plotting script (" + std::string(std::strerror(wait_error)) +
                      "): its pictures may be missing; make them later with: " + by_hand);
        return false;
    }
    if (outcome == WaitOutcome::timed_out) {
        kill(child, SIGKILL);
        while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
        }
        print_warning("the plotting script ran for more than " + format_number(timeout_s) +
                      " s and was stopped: no PNG pictures; make them later with: " + by_hand);
        return false;
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return true;
    const std::string how = WIFEXITED(status) ? "exit code " + std::to_string(WEXITSTATUS(status))
                                              : "signal " + std::to_string(WTERMSIG(status));
    print_warning("the plotting script failed (" + how + "): no PNG pictures; retry with: " + by_hand);
    return false;
}

}  // namespace fwi
