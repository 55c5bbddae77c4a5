// Time limits: every check has a Deadline that its waits on GPUs, NCCL and MPI poll against, and a
// Watchdog thread that ends the whole run when a check is stuck in a call that cannot be polled (a
// driver call that hangs, a blocking MPI collective): it reports the check as FAIL, prints the
// findings so far and exits with code 1 (3 when no GPU is visible: Report::abandon).
#pragma once

#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

#include "report.hpp"
#include "timing.hpp"

namespace fwi::doctor {

class Deadline {
public:
    explicit Deadline(double seconds) : seconds_(seconds) {}
    double seconds() const { return seconds_; }
    double elapsed() const { return timer_.seconds(); }
    double remaining() const { return seconds_ - timer_.seconds(); }
    bool passed() const { return remaining() <= 0.0; }

private:
    double seconds_;
    HostTimer timer_;
};

// The watchdog gives a check this long past its own deadline before it ends the run: the check's
// polling waits notice the deadline first; the watchdog is for calls that cannot be polled.
constexpr double kWatchdogGrace = 10.0;
// Under --mpi, the watchdogs of the ranks other than 0 give a check this much longer: a rank that ends makes
// mpirun end the job, and rank 0, which writes the report, must get to end a stuck check and report first
// (Report::abandon does within 5 s).
constexpr double kOtherRanksExtraGrace = 8.0;

// The limit to give the suite's MPI helpers that guard their own waits (a WaitTimeout, which ends the
// process with one line): past the watchdog's, so that the watchdog reports a stuck check first.
inline double backstop_seconds(const Deadline& deadline) { return deadline.remaining() + 2 * kWatchdogGrace; }

// Work queued on a GPU did not finish before the check's deadline. It cannot be cancelled, so the
// check runner reports it and ends the process (Report::abandon).
struct DeviceHang : std::runtime_error {
    DeviceHang(const std::string& what, double seconds);
    std::string next_step;  // what to try, when the check knows better than the generic hint
};

// The watchdog's next step for a stuck check `id`: how to run it again alone, with NCCL's log, as doctor
// takes it (checks 1 and 2 always run, so for them: one GPU at a time; check 7 only under mpirun with --mpi).
std::string rerun_stuck_check_advice(const std::string& id);

class Watchdog {
public:
    explicit Watchdog(Report& report);
    ~Watchdog();
    Watchdog(const Watchdog&) = delete;
    Watchdog& operator=(const Watchdog&) = delete;

    // From now on, check `id` must end within `seconds` (its own deadline plus a grace period).
    void arm(const std::string& id, double seconds);
    void disarm();

private:
    void watch();

    Report& report_;
    std::mutex mutex_;
    std::condition_variable changed_;
    bool stopping_ = false;
    bool armed_ = false;
    std::string id_;
    double seconds_ = 0.0;
    HostTimer since_armed_;
    std::thread thread_;
};

}  // namespace fwi::doctor
