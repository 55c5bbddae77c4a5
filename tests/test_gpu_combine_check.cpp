// The check of every lesson's combine in run_iterations' untimed first call (GpuShare::load_combine_check):
// a right sum passes, and a combine that gets the gradient or the misfit wrong stops the run, naming what.
// With one member the right sum is the member's own input, so a combine that does nothing is right, and
// one that doubles either part is not. With two, a combine that one member issues for both (as 04's group
// driver does) must find the other's pattern in place, however late the other's thread runs.
#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include <array>
#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cuda_check.hpp"
#include "errors.hpp"
#include "problem.hpp"
#include "shot_parallel.hpp"
#include "team.hpp"

using namespace fwi;

namespace {
// Runs one iteration of the small problem on a team of one with `combine`; the error it stops with, or "".
std::string run_with(const CombineStep& combine) {
    Problem p = problem_preset("small");
    validate(p);
    GpuShare share(p, ShotRange{0, p.nshots}, initial_model(p));
    ThreadTeam alone(1, 60.0);
    try {
        run_iterations(alone, 0, share, combine, 1, 1);
    } catch (const VerificationError& error) {
        return error.what();
    }
    return "";
}

// Two members, each on its own thread, in which member 1 leaves every barrier late, as a thread that the
// operating system runs late would.
class LateMemberTeam final : public Team {
public:
    explicit LateMemberTeam(double timeout_s) : team_(2, timeout_s) {}
    void run(const std::function<void(int member)>& fn) { team_.run_threads(fn); }

    int size() const override { return team_.size(); }
    int ranks() const override { return team_.ranks(); }
    void barrier(int member, const std::string& what) override {
        team_.barrier(member, what);
        if (member == 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
    void wait_for_member0_setup(int member, double setup_seconds) override {
        team_.wait_for_member0_setup(member, setup_seconds);
    }
    std::vector<std::vector<double>> gather(int member, const std::vector<double>& values) override {
        return team_.gather(member, values);
    }
    bool same_on_all(int member, const std::vector<float>& model) override { return team_.same_on_all(member, model); }

private:
    ThreadTeam team_;
};

// Member 0 sums both members' gradients and misfits and writes the sums into both, on each member's stream;
// member 1 only waits for that. Both shares are on GPU 0.
void sum_by_member0(std::array<std::optional<GpuShare>, 2>& shares, GpuShare& share, Team& team) {
    const int member = &share == &*shares[0] ? 0 : 1;
    if (member == 0) {
        std::vector<float> gradient(share.gradient_count(), 0.0f);
        double misfit = 0.0;
        for (const std::optional<GpuShare>& each : shares) {
            const std::vector<float> own = each->download_gradient();
            for (size_t i = 0; i < gradient.size(); ++i) gradient[i] += own[i];
            misfit += each->download_misfit();
        }
        for (std::optional<GpuShare>& each : shares) {
            CUDA_CHECK(cudaMemcpyAsync(each->device_gradient(), gradient.data(), gradient.size() * sizeof(float),
                                       cudaMemcpyHostToDevice, each->stream()));
            each->upload_misfit(misfit, "member 0's sums");
        }
    }
    team.barrier(member, "member 0's sums");
}
}  // namespace

TEST_CASE("the first combine sums a known pattern, and a combine that gets it wrong stops the run") {
    CHECK(run_with([](GpuShare&, int) {}) == "");  // one member: its own input is the sum
    // The copies go on the share's stream and are waited for: a cudaMemcpy from pageable memory may return
    // before its data has arrived, and the share's stream does not wait for the default stream's work.
    const std::string doubled_gradient = run_with([](GpuShare& share, int) {
        std::vector<float> gradient = share.download_gradient();
        for (float& value : gradient) value *= 2.0f;
        CUDA_CHECK(cudaMemcpyAsync(share.device_gradient(), gradient.data(), gradient.size() * sizeof(float),
                                   cudaMemcpyHostToDevice, share.stream()));
        CUDA_CHECK(cudaStreamSynchronize(share.stream()));
    });
    MESSAGE(doubled_gradient);
    CHECK(doubled_gradient.find("the combine is wrong: summing a known pattern over the 1 GPU") == 0);
    CHECK(doubled_gradient.find("member 0 holds") != std::string::npos);
    CHECK(doubled_gradient.find("wrong elements of 6144") != std::string::npos);
    CHECK(doubled_gradient.find("misfit") == std::string::npos);
    const std::string doubled_misfit = run_with(
        [](GpuShare& share, int) { share.upload_misfit(2.0 * share.download_misfit(), "the doubled misfit"); });
    MESSAGE(doubled_misfit);
    CHECK(doubled_misfit.find("member 0 holds the misfit's sum 2, expected 1") != std::string::npos);
}

TEST_CASE("a combine that one member issues for every member finds every member's check pattern in place") {
    Problem p = problem_preset("small");
    validate(p);
    std::array<std::optional<GpuShare>, 2> shares;
    LateMemberTeam team(60.0);
    const CombineStep combine = [&](GpuShare& share, int) { sum_by_member0(shares, share, team); };
    const std::array<ShotRange, 2> halves{ShotRange{0, p.nshots / 2}, ShotRange{p.nshots / 2, p.nshots - p.nshots / 2}};
    std::string error;
    try {
        team.run([&](int member) {
            CUDA_CHECK(cudaSetDevice(0));
            shares[member].emplace(p, halves[member], initial_model(p));
            run_iterations(team, member, *shares[member], combine, 1, 1);
        });
    } catch (const VerificationError& e) {
        error = e.what();
    }
    CHECK(error == "");
}
