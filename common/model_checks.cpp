#include "model_checks.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "errors.hpp"
#include "stencil.hpp"

namespace fwi {

namespace {

std::string cell_of(const Problem& p, size_t index) {
    return "row " + std::to_string(index / p.nx) + ", column " + std::to_string(index % p.nx);
}

std::vector<float>::const_iterator first_not_finite(const std::vector<float>& values) {
    return std::find_if(values.begin(), values.end(), [](float v) { return !std::isfinite(v); });
}

}  // namespace

void check_stable(const Problem& p, double velocity, const std::string& source) {
    const double courant_limit = max_stable_courant_number();
    const double dt_limit = courant_limit * p.dh / velocity;
    if (p.dt <= dt_limit) return;
    char text[160];
    std::snprintf(text, sizeof text, ": velocity %g m/s with --dh %g m needs dt <= %.4f * dh / v = %s s", velocity,
                  p.dh, courant_limit, format_at_most(dt_limit).c_str());
    throw UsageError("--dt: " + format_number(p.dt) + " s is unstable for " + source + text +
                     " (the CFL limit of the 8th-order stencil)");
}

void check_model(const Problem& p, const std::vector<float>& model, const std::string& source) {
    if (model.size() != p.model_cells())
        throw UsageError(source + ": " + std::to_string(model.size()) + " cells; the problem has --nz x --nx = " +
                         std::to_string(p.nz) + " x " + std::to_string(p.nx) + " = " + std::to_string(p.model_cells()));
    const auto not_finite = first_not_finite(model);
    if (not_finite != model.end())
        throw UsageError(source + ": velocity " + format_number(*not_finite) + " at " +
                         cell_of(p, size_t(not_finite - model.begin())) + " is not a finite number");
    const auto [slowest, fastest] = std::minmax_element(model.begin(), model.end());
    const size_t slowest_cell = size_t(slowest - model.begin()), fastest_cell = size_t(fastest - model.begin());
    const std::string allowed =
        "; allowed --v-min..--v-max = " + format_number(p.v_min) + ".." + format_number(p.v_max) + " m/s";
    if (!(*slowest > 0.0f))
        throw UsageError(source + ": velocity " + format_number(*slowest) + " m/s at " + cell_of(p, slowest_cell) +
                         " is not positive" + allowed);
    check_stable(p, *fastest, source + " at " + cell_of(p, fastest_cell));
    // The update clips every cell to [float(v_min), float(v_max)]: a true model outside it could never be
    // reached, a starting or resumed one would jump at the first update, and the absorbing layer is tuned
    // for v_max (medium.hpp).
    const auto outside = *slowest < float(p.v_min) ? slowest : *fastest > float(p.v_max) ? fastest : model.end();
    if (outside != model.end())
        throw UsageError(source + ": velocity " + format_number(*outside) + " m/s at " +
                         cell_of(p, size_t(outside - model.begin())) + " is outside the range the update keeps" +
                         allowed);
}

void require_finite_model(const Problem& p, const std::vector<float>& model, int iteration) {
    const auto not_finite = first_not_finite(model);
    if (not_finite != model.end())
        throw VerificationError(
            "the model after iteration " + std::to_string(iteration) + " has velocity " + format_number(*not_finite) +
            " at " + cell_of(p, size_t(not_finite - model.begin())) +
            ": the update diverged (a non-finite gradient); the run stops before anything keeps that model");
}

void require_finite_gradient(const Problem& p, const std::vector<float>& gradient, const std::string& which) {
    const auto not_finite = first_not_finite(gradient);
    if (not_finite != gradient.end())
        throw VerificationError(which + " is " + format_number(*not_finite) + " at " +
                                cell_of(p, size_t(not_finite - gradient.begin())) +
                                ": the wave fields or the combine produced a value that is not a finite number");
}

}  // namespace fwi
