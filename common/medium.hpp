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
        out.push_back({static_cast<Real>(a.e), static_cast<Real>(a.decay), static_cast<Real>(a.gain),
                       static_cast<Real>(a.inverse)});
    return out;
}

struct Acquisition {
    int source_row = 0;                // padded row of every shot
    std::vector<int> source_col;       // padded column, one per shot
    int receiver_row = 0;              // padded row of every receiver
    std::vector<int> receiver_col;     // padded column, one per receiver
    std::vector<int> receiver_of_col;  // per padded column: receiver index, or -1
    std::vector<float> wavelet;        // added to the source cell's update at each step (nt samples)
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

}  // namespace fwi
