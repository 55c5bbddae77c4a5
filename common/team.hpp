// How the GPUs of a run reach each other outside the lesson's combine: to start an iteration together,
// to wait for the slowest GPU, and to gather what each measured. Every wait has a timeout.
//   ThreadTeam  the GPUs of one process, one host thread each (01, 04, and the single-GPU reference)
//   MpiTeam     one GPU per MPI rank (03, 05, 06; mpi_team.hpp)
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

namespace fwi {

// How much longer than --timeout a member waits where member 0 has more to do than the others (its set-up
// and, at the end, the single-GPU reference repeat every member's work on one GPU): 3 x members x this
// member's own part of the same work. Member 0, which comes last, waits only --timeout: were it to allow
// for its own longer part, a member stalled before the wait would keep it waiting for hours.
inline double member0_allowance(int member, int members, double own_seconds) {
    return member == 0 ? 0.0 : 3.0 * members * own_seconds;
}

class Team {
public:
    virtual ~Team() = default;
    virtual int size() const = 0;   // members: a thread or rank each, one GPU share each
    virtual int ranks() const = 0;  // processes
    // Returns when every member has called it; throws EnvironmentError (exit 3) naming `what` when one
    // has not after the team's timeout.
    virtual void barrier(int member, const std::string& what) = 0;
    // The barrier once every member has built its share: member 0's also models every shot (and runs a
    // gradient of all of them) for the single-GPU reference, which on a large problem or a slow GPU can take
    // longer than the timeout, so the others allow for it (member0_allowance). `setup_seconds`: how long this
    // member's own share took to build.
    virtual void wait_for_member0_setup(int member, double setup_seconds) = 0;
    // Every member's values (all of the same length), in member order, on member 0; empty elsewhere.
    virtual std::vector<std::vector<double>> gather(int member, const std::vector<double>& values) = 0;
    // True on every member when every member's model equals member 0's, bit for bit.
    virtual bool same_on_all(int member, const std::vector<float>& model) = 0;
};

class ThreadTeam final : public Team {
public:
    ThreadTeam(int gpus, double timeout_s);
    // Runs fn(g) for every GPU g on its own host thread, with device g current, and joins them all. An
    // error in one thread breaks the team: the others leave their barriers at once (instead of waiting
    // out the timeout), and the first error is rethrown here. A thread that has not finished the timeout
    // after that error is stuck in a CUDA call: the process then ends at once with the error (exit_at_once).
    void run(const std::function<void(int gpu)>& fn);
    // As run, without making a device current: one thread per member (the tests run it without a GPU).
    void run_threads(const std::function<void(int member)>& fn);

    int size() const override { return size_; }
    int ranks() const override { return 1; }
    void barrier(int member, const std::string& what) override;
    void wait_for_member0_setup(int member, double setup_seconds) override;
    std::vector<std::vector<double>> gather(int member, const std::vector<double>& values) override;
    bool same_on_all(int member, const std::vector<float>& model) override;

private:
    void barrier_within(int member, const std::string& what, double timeout_s);
    void break_team();

    int size_;
    double timeout_s_;
    std::mutex mutex_;
    std::condition_variable all_arrived_;
    int arrived_ = 0;
    long generation_ = 0;
    bool broken_ = false;
    std::vector<std::vector<double>> values_;  // gather's slots
    std::vector<std::vector<float>> models_;   // same_on_all's slots
};

// The team of one GPU (01, and the single-GPU reference): its barriers return at once, so its timeout
// (any will do) is never reached.
inline ThreadTeam team_of_one() { return ThreadTeam(1, 60.0); }

}  // namespace fwi
