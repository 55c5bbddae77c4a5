#include "team.hpp"

#include <cuda_runtime.h>

#include <chrono>
#include <cstring>
#include <exception>
#include <thread>

#include "cuda_check.hpp"
#include "errors.hpp"

namespace fwi {

ThreadTeam::ThreadTeam(int gpus, double timeout_s)
    : size_(gpus), timeout_s_(timeout_s), values_(gpus), models_(gpus, nullptr) {}

void ThreadTeam::run(const std::function<void(int)>& fn) {
    std::mutex error_mutex;
    std::exception_ptr first_error;
    const auto fail = [&](std::exception_ptr error) {
        {
            std::lock_guard<std::mutex> lock(error_mutex);
            if (!first_error) first_error = error;
        }
        break_team();
    };
    std::vector<std::thread> threads;
    try {
        for (int g = 0; g < size_; ++g)
            threads.emplace_back([&, g] {
                try {
                    CUDA_CHECK(cudaSetDevice(g));
                    fn(g);
                } catch (...) {
                    fail(std::current_exception());
                }
            });
    } catch (...) {  // a thread could not be started: the ones that were must still be joined
        fail(std::current_exception());
    }
    for (auto& thread : threads) thread.join();
    if (first_error) std::rethrow_exception(first_error);
}

void ThreadTeam::break_team() {
    std::lock_guard<std::mutex> lock(mutex_);
    broken_ = true;
    all_arrived_.notify_all();
}

void ThreadTeam::barrier(int, const std::string& what) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (broken_) throw EnvironmentError("another GPU's thread failed before " + what);
    const long generation = generation_;
    if (++arrived_ == size_) {
        arrived_ = 0;
        ++generation_;
        all_arrived_.notify_all();
        return;
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s_);
    const bool passed = all_arrived_.wait_until(lock, deadline, [&] { return generation_ != generation || broken_; });
    if (broken_) throw EnvironmentError("another GPU's thread failed before " + what);
    if (!passed) {
        broken_ = true;
        all_arrived_.notify_all();
        throw EnvironmentError("timed out after " + format_number(timeout_s_) + " s waiting for " + what +
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
    models_[member] = &model;
    barrier(member, "the other GPUs' models");
    bool same = true;
    for (const auto* other : models_)
        same = same && other->size() == models_[0]->size() &&
               std::memcmp(other->data(), models_[0]->data(), other->size() * sizeof(float)) == 0;
    barrier(member, "the model comparison");  // the models stay alive until every thread compared them
    return same;
}

}  // namespace fwi
