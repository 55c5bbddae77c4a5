#include "team.hpp"

#include <cuda_runtime.h>

#include <chrono>
#include <cstring>
#include <exception>
#include <thread>

#include "cuda_check.hpp"
#include "errors.hpp"

namespace fwi {

ThreadTeam::ThreadTeam(int gpus, double timeout_s) : size_(gpus), timeout_s_(timeout_s), values_(gpus), models_(gpus) {}

void ThreadTeam::run(const std::function<void(int)>& fn) {
    run_threads([&fn](int g) {
        CUDA_CHECK(cudaSetDevice(g));
        fn(g);
    });
}

void ThreadTeam::run_threads(const std::function<void(int)>& fn) {
    std::mutex progress_mutex;
    std::condition_variable progress;
    int finished = 0;
    std::exception_ptr first_error;
    const auto fail = [&](std::exception_ptr error) {
        {
            std::lock_guard<std::mutex> lock(progress_mutex);
            if (!first_error) first_error = error;
        }
        progress.notify_all();
        break_team();
    };
    std::vector<std::thread> threads;
    try {
        for (int g = 0; g < size_; ++g)
            threads.emplace_back([&, g] {
                try {
                    fn(g);
                } catch (...) {
                    fail(std::current_exception());
                }
                std::lock_guard<std::mutex> lock(progress_mutex);
                ++finished;
                progress.notify_all();
            });
    } catch (...) {  // a thread could not be started: the ones that were must still be joined
        fail(std::current_exception());
    }
    // The waits between threads have their timeout, so the threads end, and after an error the others leave
    // their barriers at once. But a thread stuck in a CUDA call (a hung kernel it synchronises with, or
    // memory it frees on its way out) never returns, and joining it would hang with the error unreported.
    // So once a thread has reported an error, the others get the team's timeout to finish; then the process
    // ends without them. (A thread reports its error after unwinding: one stuck in its own destructors
    // reports nothing, and its GPU's work is what the others then wait for, until their barriers time out.)
    const int started = static_cast<int>(threads.size());
    std::unique_lock<std::mutex> lock(progress_mutex);
    progress.wait(lock, [&] { return finished == started || first_error; });
    if (!progress.wait_for(lock, std::chrono::duration<double>(timeout_s_), [&] { return finished == started; }))
        exit_at_once(first_error, std::to_string(started - finished) + " of the GPUs' threads had not finished " +
                                      format_number(timeout_s_) +
                                      " s (--timeout) after that error, stuck in a CUDA or NCCL call (a hung GPU, "
                                      "a blocking NCCL call?): the program ends without waiting for them");
    lock.unlock();
    for (auto& thread : threads) thread.join();
    if (first_error) std::rethrow_exception(first_error);
}

void ThreadTeam::break_team() {
    std::lock_guard<std::mutex> lock(mutex_);
    broken_ = true;
    all_arrived_.notify_all();
}

void ThreadTeam::barrier(int member, const std::string& what) { barrier_within(member, what, timeout_s_); }

void ThreadTeam::wait_for_member0_setup(int member, double setup_seconds) {
    barrier_within(member, "every GPU's set-up (GPU 0's also models every shot for the single-GPU reference)",
                   member0_allowance(member, size_, setup_seconds) + timeout_s_);
}

void ThreadTeam::barrier_within(int, const std::string& what, double timeout_s) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (broken_) throw EnvironmentError("another GPU's thread failed before " + what);
    const long generation = generation_;
    if (++arrived_ == size_) {
        arrived_ = 0;
        ++generation_;
        all_arrived_.notify_all();
        return;
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    const bool woken = all_arrived_.wait_until(lock, deadline, [&] { return generation_ != generation || broken_; });
    // Passed first: the last member may have arrived and then failed before this thread woke up.
    if (generation_ != generation) return;
    if (broken_) throw EnvironmentError("another GPU's thread failed before " + what);
    if (!woken) {
        broken_ = true;
        all_arrived_.notify_all();
        throw EnvironmentError("timed out after " + format_number(timeout_s) + " s waiting for " + what +
                               " (raise --timeout if the GPUs are just slow)");
    }
}

std::vector<std::vector<double>> ThreadTeam::gather(int member, const std::vector<double>& values) {
    values_[member] = values;
    barrier(member, "the other GPUs' timings");
    std::vector<std::vector<double>> all;
    if (member == 0) all = values_;
    barrier(member, "GPU 0 to read the timings");  // no slot is written again before GPU 0 has read it
    return all;
}

bool ThreadTeam::same_on_all(int member, const std::vector<float>& model) {
    // A copy, not a pointer: a thread that leaves at the second barrier's timeout frees its model while
    // the others may still be comparing.
    models_[member] = model;
    barrier(member, "the other GPUs' models");
    bool same = true;
    for (const std::vector<float>& other : models_)
        same = same && other.size() == models_[0].size() &&
               std::memcmp(other.data(), models_[0].data(), other.size() * sizeof(float)) == 0;
    barrier(member, "the model comparison");  // no slot is written again before every thread compared them
    return same;
}

}  // namespace fwi
