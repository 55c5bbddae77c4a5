// The discrete wave operator, written once for host and device (the CPU reference and the GPU kernels
// both call these functions, so they cannot drift apart; the one exception, layer_coupling, says so).
//
// Constant-density acoustic wave equation, second order in time, 8th order in space, with c = (v dt/dh)^2
// and L the dimensionless 8th-order Laplacian. Inside the model:
//     u[n+1] = 2 u[n] - u[n-1] + c L u[n] + s[n]
// Around the model, an absorbing layer: a split-field perfectly matched layer (PML) for the
// second-order equation. The field is split u = X + Z and each part is damped along its own axis,
//     X_tt + 2 ex X_t + ex^2 X = v^2 (d2u/dx2 - Px),   Px_t + ex Px = ex' du/dx   (Z likewise along z)
// with ex the damping rate across x and ex' its slope. The ex^2 term and the memory variable P (from
// the stretched coordinate's derivative) make the layer match the interior at every angle: it reflects
// about 0.15% at 20 cells, where a plain damping layer of the same width reflected 3-5% and a split
// layer without P 3% (measured with tests/test_cpu_propagator.cpp's reflection test). Stored fields
// carry a frame of kHalo zero cells that is never written, so the stencils need no branches and L is a
// symmetric matrix: the adjoint (layer_adjoint below) is the exact transpose, layer included.
#pragma once

#include <cmath>
#include <cstddef>

#if defined(__CUDACC__)
#define FWI_HD __host__ __device__ __forceinline__
#else
#define FWI_HD inline
#endif

namespace fwi {

constexpr int kStencilRadius = 4;
constexpr int kHalo = kStencilRadius;

// Second-derivative coefficients, 8th order: dh^2 d2u/dx2 ~ c0 u[x] + sum_{k=1..4} ck (u[x+k] + u[x-k]).
struct StencilCoefficients {
    static constexpr double c0 = -205.0 / 72.0;
    static constexpr double c1 = 8.0 / 5.0;
    static constexpr double c2 = -1.0 / 5.0;
    static constexpr double c3 = 8.0 / 315.0;
    static constexpr double c4 = -1.0 / 560.0;
};

// Largest stable Courant number v dt / dh for this stencil in 2D with leapfrog time stepping:
// c times the largest eigenvalue of -L must stay <= 4. That eigenvalue (the Nyquist wave number in
// both directions) is 2 (-c0 + 2 (c1 - c2 + c3 - c4)) = 13.003, so v dt / dh <= 2 / sqrt(13.003) = 0.5546.
inline double max_stable_courant_number() {
    using K = StencilCoefficients;
    const double nyquist_1d = -K::c0 + 2.0 * (K::c1 - K::c2 + K::c3 - K::c4);
    const double nyquist_2d = 2.0 * nyquist_1d;
    return 2.0 / std::sqrt(nyquist_2d);
}

// dh^2 d2u/da2 along one axis at flat index i: `step` is 1 along x, the row stride along z.
template <typename Real>
FWI_HD Real second_difference(const Real* u, size_t i, size_t step) {
    using K = StencilCoefficients;
    return Real(K::c0) * u[i] + Real(K::c1) * (u[i - step] + u[i + step]) +
           Real(K::c2) * (u[i - 2 * step] + u[i + 2 * step]) + Real(K::c3) * (u[i - 3 * step] + u[i + 3 * step]) +
           Real(K::c4) * (u[i - 4 * step] + u[i + 4 * step]);
}

// dh du/da along one axis, 8th-order centred difference (an antisymmetric matrix: its transpose is -D).
template <typename Real>
FWI_HD Real first_difference(const Real* u, size_t i, size_t step) {
    return Real(4.0 / 5.0) * (u[i + step] - u[i - step]) - Real(1.0 / 5.0) * (u[i + 2 * step] - u[i - 2 * step]) +
           Real(4.0 / 105.0) * (u[i + 3 * step] - u[i - 3 * step]) -
           Real(1.0 / 280.0) * (u[i + 4 * step] - u[i - 4 * step]);
}

// The 8th-order Laplacian times dh^2.
template <typename Real>
FWI_HD Real laplacian(const Real* u, size_t i, size_t stride) {
    return second_difference(u, i, 1) + second_difference(u, i, stride);
}

// One interior time step at one cell (no absorbing layer there).
template <typename Real>
FWI_HD Real interior_update(Real current, Real lap, Real previous, Real c) {
    return Real(2) * current - previous + c * lap;
}

// PML coefficients of one row or column: e = eta dt, decay = exp(-e), the memory variable's gain
// q = (1 - decay) / e * d(eta dt)/d(cell), and inverse = 1 / (1 + e); outside the layer e and gain are
// zero and decay and inverse one. The updates multiply by `inverse` rather than divide by 1 + e: a
// division is a dozen instructions on the GPU, and the border kernels are bound by instruction issue.
// Four values, aligned so that the GPU reads them with one 16-byte load.
template <typename Real>
struct alignas(4 * sizeof(Real)) PmlAxis {
    Real e, decay, gain, inverse;
};

// One step of a cell inside the absorbing layer (forward). Inputs: u and X at n and n-1, the axis
// second and first differences of u[n], P[n-1] on both axes. Outputs: u[n+1], X[n+1], Px[n], Pz[n].
template <typename Real>
struct LayerForward {
    Real u_next, x_next, px, pz;
};

template <typename Real>
FWI_HD LayerForward<Real> layer_forward(Real u, Real u_prev, Real x, Real x_prev, Real lap_x, Real lap_z, Real du_x,
                                        Real du_z, Real px_prev, Real pz_prev, Real c, PmlAxis<Real> ax,
                                        PmlAxis<Real> az) {
    LayerForward<Real> r;
    r.px = ax.decay * px_prev + ax.gain * du_x;
    r.pz = az.decay * pz_prev + az.gain * du_z;
    r.x_next = ((Real(2) - ax.e * ax.e) * x - (Real(1) - ax.e) * x_prev + c * (lap_x - r.px)) * ax.inverse;
    const Real z_next =
        ((Real(2) - az.e * az.e) * (u - x) - (Real(1) - az.e) * (u_prev - x_prev) + c * (lap_z - r.pz)) * az.inverse;
    r.u_next = r.x_next + z_next;
    return r;
}

// The adjoint step: the transpose of layer_forward, run backwards in time. With lambda, chi and pi the
// adjoint states of u, X and P, and a = 1 / (1 + e) per axis, it works in scaled variables:
//   zeta = c a_z lambda (the main adjoint field; in the interior it obeys the forward interior update),
//   delta = c a_x chi - zeta (zero in the interior), rho = gain * pi (per axis).
// `coupled` = c (L zeta[m+1] + Lx delta[m+1] - Dx rho_x[m] - Dz rho_z[m] + adjoint source).
// The interior case is zeta[m] = coupled + 2 zeta[m+1] - zeta[m+2]. The gradient with respect to c is
// sum_m (zeta[m+1] + delta[m+1]) (Lx u[m] - Px[m]) + zeta[m+1] (Lz u[m] - Pz[m]), divided by c.
template <typename Real>
struct LayerAdjoint {
    Real zeta, delta, rho_x, rho_z;  // zeta[m], delta[m], rho_x[m-1], rho_z[m-1]
};

template <typename Real>
FWI_HD LayerAdjoint<Real> layer_adjoint(Real coupled, Real zeta1, Real zeta2, Real delta1, Real delta2, Real rho_x,
                                        Real rho_z, PmlAxis<Real> ax, PmlAxis<Real> az) {
    LayerAdjoint<Real> r;
    r.zeta = (coupled + (Real(2) - az.e * az.e) * zeta1 - (Real(1) - az.e) * zeta2) * az.inverse;
    const Real xi1 = zeta1 + delta1, xi2 = zeta2 + delta2;
    const Real xi = (coupled + (Real(2) - ax.e * ax.e) * xi1 - (Real(1) - ax.e) * xi2) * ax.inverse;
    r.delta = xi - r.zeta;
    r.rho_x = ax.decay * rho_x - ax.gain * xi;
    r.rho_z = az.decay * rho_z - az.gain * r.zeta;
    return r;
}

// Layout of one stored field: the model (nz x nx) plus `width` absorbing cells on every side (the
// "padded" grid) plus the zero halo. Rows are padded to a multiple of 32 floats for aligned access, with
// a few slack rows and columns (zero, never used) so the GPU's 16-byte loads of 4 x 4 cell blocks
// never leave the field. The first kLeadColumns columns of a row are zero (the halo and more), so that
// every row of the padded grid starts on a 32-byte boundary: the GPU moves memory in 32-byte sectors,
// and a row that began 16 bytes into one cost the default gradient about 2 ms on an H200 (2026-11-23:
// docs/PERFORMANCE.md, "Rows that start on a 32-byte sector").
struct FieldLayout {
    static constexpr int kSlackRows = 4, kSlackColumns = 4;
    static constexpr int kFloatsPerSector = 8;             // the GPU's 32-byte sector
    static constexpr int kLeadColumns = kFloatsPerSector;  // so that every row starts on a sector
    static_assert(kLeadColumns >= kHalo && kLeadColumns % 4 == 0, "the halo, and 16-byte loads aligned");
    int nz = 0, nx = 0;  // physical model
    int width = 0;       // absorbing cells on each side
    int nz_padded = 0, nx_padded = 0;
    int rows = 0;      // nz_padded + 2 kHalo + kSlackRows
    int stride = 0;    // floats per stored row, >= kLeadColumns + nx_padded + kHalo + kSlackColumns
    size_t cells = 0;  // rows * stride: floats per stored field

    static FieldLayout make(int nz, int nx, int width) {
        FieldLayout l;
        l.nz = nz;
        l.nx = nx;
        l.width = width;
        l.nz_padded = nz + 2 * width;
        l.nx_padded = nx + 2 * width;
        l.rows = l.nz_padded + 2 * kHalo + kSlackRows;
        l.stride = (kLeadColumns + l.nx_padded + kHalo + kSlackColumns + 31) / 32 * 32;
        l.cells = static_cast<size_t>(l.rows) * l.stride;
        return l;
    }
    // Flat index of padded-grid cell (zp, xp), 0 <= zp < nz_padded, 0 <= xp < nx_padded.
    FWI_HD size_t index(int zp, int xp) const { return static_cast<size_t>(zp + kHalo) * stride + (xp + kLeadColumns); }
    size_t padded_cells() const { return static_cast<size_t>(nz_padded) * nx_padded; }

    // The absorbing layer: the x band (left and right `width` columns, all rows) and the z band (top
    // and bottom `width` rows, all columns); they overlap in the corners.
    FWI_HD bool in_layer(int zp, int xp) const {
        return xp < width || xp >= nx_padded - width || zp < width || zp >= nz_padded - width;
    }
    // Columns / rows whose stencil reaches into the x / z band.
    FWI_HD bool near_x_band(int xp) const {
        const int reach = width + kStencilRadius;
        return width > 0 && (xp < reach || xp >= nx_padded - reach);
    }
    FWI_HD bool near_z_band(int zp) const {
        const int reach = width + kStencilRadius;
        return width > 0 && (zp < reach || zp >= nz_padded - reach);
    }
    // Compact index of a cell in the x band, -1 outside it; the band holds nz_padded * 2 width cells.
    FWI_HD int x_band_index(int zp, int xp) const {
        const int column = xp < width ? xp : (xp >= nx_padded - width ? xp - (nx_padded - 2 * width) : -1);
        return column < 0 ? -1 : zp * 2 * width + column;
    }
    // Compact index of a cell in the z band, -1 outside it; the band holds 2 width * nx_padded cells.
    FWI_HD int z_band_index(int zp, int xp) const {
        const int row = zp < width ? zp : (zp >= nz_padded - width ? zp - (nz_padded - 2 * width) : -1);
        return row < 0 ? -1 : row * nx_padded + xp;
    }
    // Compact index of a cell anywhere in the layer (both bands), -1 inside the model: the top band,
    // the bottom band, then the left and right strips of the rows in between.
    FWI_HD int frame_index(int zp, int xp) const {
        if (zp < width) return zp * nx_padded + xp;
        if (zp >= nz_padded - width) return (zp - (nz_padded - 2 * width)) * nx_padded + xp;
        const int column = xp < width ? xp : (xp >= nx_padded - width ? xp - (nx_padded - 2 * width) : -1);
        return column < 0 ? -1 : 2 * width * nx_padded + (zp - width) * 2 * width + column;
    }
    FWI_HD size_t frame_cells() const {
        return static_cast<size_t>(2 * width) * nx_padded + static_cast<size_t>(nz_padded - 2 * width) * 2 * width;
    }
    FWI_HD size_t x_band_cells() const { return static_cast<size_t>(nz_padded) * 2 * width; }
    FWI_HD size_t z_band_cells() const { return static_cast<size_t>(2 * width) * nx_padded; }
};

// The adjoint's coupling to the layer's fields at cell (zp, xp), stored at index i, Lx delta - Dx rho_x -
// Dz rho_z (see layer_adjoint; delta is delta[m+1], the rhos rho[m]), reading only where they can be
// non-zero: rho_x lives in the x band, rho_z in the z band, delta in both; so the three stencils are
// needed only within kStencilRadius of a band. The CPU reference calls it; the GPU's adjoint border
// kernel sums the same terms without these branches, and the GPU-vs-CPU tests keep the two together.
template <typename Real>
FWI_HD Real layer_coupling(const FieldLayout& l, int zp, int xp, const Real* delta, const Real* rho_x,
                           const Real* rho_z, size_t i, size_t stride) {
    const bool near_x = l.near_x_band(xp), near_z = l.near_z_band(zp);
    const bool in_z_band = zp < l.width || zp >= l.nz_padded - l.width;
    Real coupling = Real(0);
    if (near_x || in_z_band) coupling += second_difference(delta, i, 1);
    if (near_x) coupling -= first_difference(rho_x, i, 1);
    if (near_z) coupling -= first_difference(rho_z, i, stride);
    return coupling;
}

}  // namespace fwi
