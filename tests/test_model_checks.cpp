// check_model and check_stable (common/model_checks.hpp): which models are refused, and that each message
// names the model's source, the cell and the limit.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "errors.hpp"
#include "model_checks.hpp"
#include "problem.hpp"
#include "stencil.hpp"

using namespace fwi;

namespace {

const char* const kSource = "the test model (--test-flag)";

// The UsageError's message, "" when `check` accepts.
template <typename Check>
std::string refusal(Check check) {
    try {
        check();
    } catch (const UsageError& e) {
        return e.what();
    }
    return "";
}

std::string model_refusal(const Problem& p, const std::vector<float>& model) {
    return refusal([&] { check_model(p, model, kSource); });
}

// The small problem's initial model with one cell (row 10, column 20) set to `value`.
std::vector<float> with_cell(const Problem& p, float value) {
    std::vector<float> model = initial_model(p);
    model[size_t(10) * p.nx + 20] = value;
    return model;
}

}  // namespace

TEST_CASE("check_model accepts the presets' models and the range's edges") {
    for (const std::string& name : problem_preset_names()) {
        const Problem p = problem_preset(name);
        CAPTURE(name);
        CHECK(model_refusal(p, true_model(p)) == "");
        CHECK(model_refusal(p, initial_model(p)) == "");
    }
    const Problem p = problem_preset("small");
    CHECK(model_refusal(p, with_cell(p, float(p.v_min))) == "");
    CHECK(model_refusal(p, with_cell(p, float(p.v_max))) == "");
}

TEST_CASE("check_model refuses a model that is not finite, naming the source and the cell") {
    const Problem p = problem_preset("small");
    const std::string nan = model_refusal(p, with_cell(p, std::numeric_limits<float>::quiet_NaN()));
    CHECK(nan.find(std::string(kSource) + ": velocity nan at row 10, column 20 is not a finite number") !=
          std::string::npos);
    const std::string inf = model_refusal(p, with_cell(p, std::numeric_limits<float>::infinity()));
    CHECK(inf.find("velocity inf at row 10, column 20 is not a finite number") != std::string::npos);
}

TEST_CASE("check_model refuses zero and negative velocities, naming the allowed range") {
    const Problem p = problem_preset("small");
    for (float value : {0.0f, -0.0f, -1500.0f}) {
        CAPTURE(value);
        const std::string message = model_refusal(p, with_cell(p, value));
        CHECK(message.find(kSource) == 0);
        CHECK(message.find("at row 10, column 20 is not positive; allowed --v-min..--v-max = 1000..3000 m/s") !=
              std::string::npos);
    }
}

TEST_CASE("check_model refuses velocities outside --v-min..--v-max") {
    const Problem p = problem_preset("small");
    CHECK(model_refusal(p, with_cell(p, 999.0f))
              .find("velocity 999 m/s at row 10, column 20 is outside the range the update keeps; allowed "
                    "--v-min..--v-max = 1000..3000 m/s") != std::string::npos);
    CHECK(model_refusal(p, with_cell(p, 3001.0f)).find("velocity 3001 m/s at row 10, column 20 is outside") !=
          std::string::npos);
}

TEST_CASE("check_model refuses a velocity beyond the CFL limit, even inside --v-min..--v-max") {
    Problem p = problem_preset("small");
    p.v_max = 9000.0;  // so the stability check, not the range, is what refuses
    const double v_limit = max_stable_courant_number() * p.dh / p.dt;
    CHECK(model_refusal(p, with_cell(p, float(0.99 * v_limit))) == "");
    const std::string message = model_refusal(p, with_cell(p, float(1.01 * v_limit)));
    CHECK(message.find(std::string("--dt: 0.0008 s is unstable for ") + kSource + " at row 10, column 20") == 0);
    CHECK(message.find("needs dt <= 0.5546 * dh / v") != std::string::npos);
}

TEST_CASE("check_model refuses a model of the wrong size") {
    const Problem p = problem_preset("small");
    CHECK(model_refusal(p, std::vector<float>(10, 1500.0f)).find("10 cells; the problem has --nz x --nx = 64 x 96") !=
          std::string::npos);
}

TEST_CASE("check_stable names the source and the largest stable time step") {
    const Problem p = problem_preset("default");  // dt 0.0008, dh 6: stable up to 4159 m/s
    CHECK(refusal([&] { check_stable(p, 4100.0, "--v-max"); }) == "");
    const std::string message = refusal([&] { check_stable(p, 4200.0, "--v-max"); });
    CHECK(message.find("--dt: 0.0008 s is unstable for --v-max: velocity 4200 m/s with --dh 6 m needs dt <= ") == 0);
}

TEST_CASE("require_finite_model stops a run whose update made the model non-finite") {
    const Problem p = problem_preset("small");
    CHECK_NOTHROW(require_finite_model(p, initial_model(p), 3));
    CHECK_THROWS_WITH_AS(require_finite_model(p, with_cell(p, std::numeric_limits<float>::quiet_NaN()), 7),
                         doctest::Contains("the model after iteration 7 has velocity nan at row 10, column 20"),
                         VerificationError);
}

TEST_CASE("require_finite_gradient stops a run whose gradient is not finite, in a masked row too") {
    const Problem p = problem_preset("small");
    const std::vector<float> zero(p.model_cells(), 0.0f);
    CHECK_NOTHROW(require_finite_gradient(p, zero, "the first gradient"));
    for (const float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
        std::vector<float> gradient = zero;
        gradient[size_t(1) * p.nx + 3] = bad;  // row 1: inside --mask-rows, which the update leaves alone
        const std::string expected =
            std::string("the first gradient is ") + (std::isnan(bad) ? "nan" : "inf") + " at row 1, column 3";
        CHECK_THROWS_WITH_AS(require_finite_gradient(p, gradient, "the first gradient"),
                             doctest::Contains(expected.c_str()), VerificationError);
    }
}
