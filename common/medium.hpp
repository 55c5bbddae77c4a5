// What a propagator needs besides its wavefields, laid out on the stored field grid (model + absorbing
// layer + zero halo): the Courant field, the damping profiles and the acquisition geometry.
// Shared by the CPU reference and the GPU propagator.
#pragma once

#include <algorithm>
#include <vector>

#include "problem.hpp"
#include "stencil.hpp"

namespace fwi {

// PML profile across the absorbing layer: eta(d) = eta_max (d / width)^2 at the d-th cell into the
// layer, eta_max = kPmlStrength * v_max / (width dh). The strength was tuned with the reflection test
// (tests/test_cpu_propagator.cpp, sources and receivers near the top): 5 gives 0.15% at the default
// width, 3 gives 1.0% and 10 gives 0.19%. It depends on the problem, never on the current model, so the
// gradient needs no term for it.
constexpr double kPmlStrength = 5.0;

// One PmlAxis per padded row (padded_length = nz_padded) or column (nx_padded), in double.
std::vector<PmlAxis<double>> pml_profile(const Problem& problem, int padded_length);

template <typename Real>
std::vector<PmlAxis<Real>> pml_profile_as(const Problem& problem, int padded_length) {
    std::vector<PmlAxis<Real>> out;
    for (const auto& a : pml_profile(problem, padded_length))
        out.push_back({static_cast<Real>(a.e), static_cast<Real>(a.decay), static_cast<Real>(a.gain)});
    return out;
}

struct Acquisition {
    int source_row = 0;                 // padded row of every shot
    std::vector<int> source_col;        // padded column, one per shot
    int receiver_row = 0;               // padded row of every receiver
    std::vector<int> receiver_col;      // padded column, one per receiver
    std::vector<int> receiver_of_col;   // per padded column: receiver index, or -1
    std::vector<float> wavelet;         // added to the source cell's update at each step (nt samples)
};

Acquisition make_acquisition(const Problem& problem, const FieldLayout& layout);

inline FieldLayout make_layout(const Problem& problem) {
    return FieldLayout::make(problem.nz, problem.nx, problem.absorb_width);
}

// The physical cell whose velocity the padded cell (zp, xp) copies: the model is extended into the
// absorbing layer by repeating its edge values.
inline size_t model_index_of_padded(const FieldLayout& l, int zp, int xp) {
    const int z = std::clamp(zp - l.width, 0, l.nz - 1);
    const int x = std::clamp(xp - l.width, 0, l.nx - 1);
    return static_cast<size_t>(z) * l.nx + x;
}

// c = (v dt / dh)^2 on the stored grid; zero in the halo.
template <typename Real>
std::vector<Real> courant_field(const Problem& problem, const FieldLayout& l, const std::vector<float>& velocity) {
    std::vector<Real> c(l.cells, Real(0));
    const double scale = problem.dt / problem.dh;
    for (int zp = 0; zp < l.nz_padded; ++zp)
        for (int xp = 0; xp < l.nx_padded; ++xp) {
            const double courant = velocity[model_index_of_padded(l, zp, xp)] * scale;
            c[l.index(zp, xp)] = static_cast<Real>(courant * courant);
        }
    return c;
}

// dJ/dv on the model grid from the imaging sum I = sum_n psi[n+1] L u[n] on the stored grid:
// dJ/dc = I / c and dc/dv = 2 c / v, so dJ/dv = 2 I / v, summed over every padded cell that copies the
// model cell (edge cells own their strip of the absorbing layer). `imaging` holds `shots` stored
// fields, summed here in a fixed order.
template <typename Real>
std::vector<float> fold_gradient(const FieldLayout& l, const Real* imaging, int shots,
                                 const std::vector<float>& velocity) {
    std::vector<double> sum(static_cast<size_t>(l.nz) * l.nx, 0.0);
    for (int zp = 0; zp < l.nz_padded; ++zp)
        for (int xp = 0; xp < l.nx_padded; ++xp) {
            double cell = 0.0;
            for (int s = 0; s < shots; ++s) cell += imaging[s * l.cells + l.index(zp, xp)];
            sum[model_index_of_padded(l, zp, xp)] += cell;
        }
    std::vector<float> gradient(sum.size());
    for (size_t i = 0; i < sum.size(); ++i) gradient[i] = static_cast<float>(2.0 * sum[i] / velocity[i]);
    return gradient;
}

}  // namespace fwi
