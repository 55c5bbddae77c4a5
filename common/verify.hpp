// Verification helpers: array differences, the dot-product (adjoint) test and the Taylor test.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace fwi {

// A NaN anywhere makes every figure NaN, and so does a comparison of nothing (no elements, or arrays
// of different sizes): a check `x < tolerance` then fails instead of passing on what it did not see.
struct Difference {
    double relative_l2 = 0.0;  // ||a - ref|| / ||ref|| (absolute ||a|| when ref is zero)
    double max_abs = 0.0;      // max |a - ref|
    double ref_max_abs = 0.0;  // max |ref|, to read max_abs against
};

inline Difference nothing_compared() {
    const double nan = std::nan("");
    return {nan, nan, nan};
}

// max(a, b) that keeps a NaN of either (std::max drops one in its second argument).
inline double max_keeping_nan(double a, double b) { return std::isnan(a) || a >= b ? a : b; }

template <typename A, typename B>
Difference compare(const A* values, const B* reference, size_t count) {
    if (count == 0) return nothing_compared();
    double diff2 = 0.0, ref2 = 0.0;
    Difference d;
    for (size_t i = 0; i < count; ++i) {
        const double diff = double(values[i]) - double(reference[i]);
        diff2 += diff * diff;
        ref2 += double(reference[i]) * double(reference[i]);
        d.max_abs = max_keeping_nan(d.max_abs, std::abs(diff));
        d.ref_max_abs = max_keeping_nan(d.ref_max_abs, std::abs(double(reference[i])));
    }
    d.relative_l2 = ref2 > 0.0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
    return d;
}

template <typename A, typename B>
Difference compare(const std::vector<A>& values, const std::vector<B>& reference) {
    if (values.size() != reference.size()) return nothing_compared();
    return compare(values.data(), reference.data(), values.size());
}

// "rel L2 3.1e-07, max abs 2.0e-06 (of 0.41)"
std::string describe(const Difference& d);

template <typename A, typename B>
double dot(const std::vector<A>& a, const std::vector<B>& b) {
    double sum = 0.0;  // float64 accumulation, so the test sees the operators' rounding, not the sum's
    for (size_t i = 0; i < a.size(); ++i) sum += double(a[i]) * double(b[i]);
    return sum;
}

// Dot-product test of a linear operator F and its claimed adjoint: |<F x, y> - <x, F^T y>| relative to
// the larger of the two. Exact adjoints give float rounding (~1e-7 in float32, ~1e-15 in float64).
struct DotProductTest {
    double forward_side = 0.0, adjoint_side = 0.0, relative_mismatch = 0.0;
};
DotProductTest dot_product_test(double forward_side, double adjoint_side);

// Taylor test of a gradient: for steps h, the first-order remainder |J(m + h dm) - J(m)| falls like h,
// the second-order remainder |J(m + h dm) - J(m) - h <g, dm>| like h^2 when g is the gradient.
struct TaylorTest {
    std::vector<double> steps, first_order, second_order;
    double first_order_slope = 0.0, second_order_slope = 0.0;  // least-squares slopes in log-log
};
TaylorTest taylor_test(const std::function<double(double h)>& misfit_along_direction, double misfit_at_zero,
                       double directional_derivative, const std::vector<double>& steps);

}  // namespace fwi
