#include "verify.hpp"

#include <cmath>
#include <cstdio>

namespace fwi {

std::string describe(const Difference& d) {
    char text[128];
    std::snprintf(text, sizeof text, "rel L2 %.2e, max abs %.2e (of %.3g)", d.relative_l2, d.max_abs, d.ref_max_abs);
    return text;
}

DotProductTest dot_product_test(double forward_side, double adjoint_side) {
    DotProductTest t;
    t.forward_side = forward_side;
    t.adjoint_side = adjoint_side;
    // Both zero is a match; a NaN on either side makes the mismatch NaN, which no tolerance accepts.
    const double scale = max_keeping_nan(std::abs(forward_side), std::abs(adjoint_side));
    t.relative_mismatch =
        forward_side == 0.0 && adjoint_side == 0.0 ? 0.0 : std::abs(forward_side - adjoint_side) / scale;
    return t;
}

namespace {
double log_log_slope(const std::vector<double>& x, const std::vector<double>& y) {
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    const double n = double(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
        const double lx = std::log(x[i]), ly = std::log(y[i]);
        sx += lx;
        sy += ly;
        sxx += lx * lx;
        sxy += lx * ly;
    }
    return (n * sxy - sx * sy) / (n * sxx - sx * sx);
}
}  // namespace

TaylorTest taylor_test(const std::function<double(double h)>& misfit_along_direction, double misfit_at_zero,
                       double directional_derivative, const std::vector<double>& steps) {
    TaylorTest t;
    t.steps = steps;
    for (double h : steps) {
        const double change = misfit_along_direction(h) - misfit_at_zero;
        t.first_order.push_back(std::abs(change));
        t.second_order.push_back(std::abs(change - h * directional_derivative));
    }
    t.first_order_slope = log_log_slope(t.steps, t.first_order);
    t.second_order_slope = log_log_slope(t.steps, t.second_order);
    return t;
}

}  // namespace fwi
