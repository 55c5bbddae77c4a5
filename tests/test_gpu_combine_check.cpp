// The check of every lesson's combine in run_iterations' untimed first call (GpuShare::load_combine_check):
// a right sum passes, and a combine that gets the gradient or the misfit wrong stops the run, naming what.
// With one member the right sum is the member's own input, so a combine that does nothing is right, and
// one that doubles either part is not.
#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include <string>
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
}  // namespace

TEST_CASE("the first combine sums a known pattern, and a combine that gets it wrong stops the run") {
    CHECK(run_with([](GpuShare&, int) {}) == "");  // one member: its own input is the sum
    const std::string doubled_gradient = run_with([](GpuShare& share, int) {
        std::vector<float> gradient = share.download_gradient();
        for (float& value : gradient) value *= 2.0f;
        CUDA_CHECK(cudaMemcpy(share.device_gradient(), gradient.data(), gradient.size() * sizeof(float),
                              cudaMemcpyHostToDevice));
    });
    MESSAGE(doubled_gradient);
    CHECK(doubled_gradient.find("the combine is wrong: summing a known pattern over the 1 GPUs") == 0);
    CHECK(doubled_gradient.find("member 0 holds") != std::string::npos);
    CHECK(doubled_gradient.find("wrong elements of 6144") != std::string::npos);
    CHECK(doubled_gradient.find("misfit") == std::string::npos);
    const std::string doubled_misfit = run_with([](GpuShare& share, int) {
        const double misfit = 2.0 * share.download_misfit();
        CUDA_CHECK(cudaMemcpy(share.device_misfit(), &misfit, sizeof misfit, cudaMemcpyHostToDevice));
    });
    MESSAGE(doubled_misfit);
    CHECK(doubled_misfit.find("member 0 holds the misfit's sum 2, expected 1") != std::string::npos);
}
