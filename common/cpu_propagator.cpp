#include "cpu_propagator.hpp"

#include <algorithm>

namespace fwi {

namespace {
// dJ/dv on the model grid from the imaging sum I (dJ/dc times c, on the stored grid): dc/dv = 2 c / v,
// so dJ/dv = 2 I / v, summed over every padded cell that copies the model cell (edge cells own their
// strip of the absorbing layer).
template <typename Real>
std::vector<float> fold_gradient(const FieldLayout& l, const std::vector<Real>& imaging,
                                 const std::vector<float>& velocity) {
    std::vector<double> sum(static_cast<size_t>(l.nz) * l.nx, 0.0);
    for (int zp = 0; zp < l.nz_padded; ++zp)
        for (int xp = 0; xp < l.nx_padded; ++xp) sum[model_index_of_padded(l, zp, xp)] += imaging[l.index(zp, xp)];
    std::vector<float> gradient(sum.size());
    for (size_t i = 0; i < sum.size(); ++i) gradient[i] = static_cast<float>(2.0 * sum[i] / velocity[i]);
    return gradient;
}
}  // namespace

template <typename Real>
CpuPropagator<Real>::CpuPropagator(const Problem& problem, const std::vector<float>& velocity)
    : problem_(problem),
      velocity_(velocity),
      layout_(make_layout(problem)),
      acquisition_(make_acquisition(problem, layout_)),
      courant_(courant_field<Real>(problem, layout_, velocity)),
      rows_(pml_profile_as<Real>(problem, layout_.nz_padded)),
      columns_(pml_profile_as<Real>(problem, layout_.nx_padded)) {}

template <typename Real>
std::vector<Real> CpuPropagator<Real>::forward(int shot, const std::vector<Real>& wavelet,
                                               ForwardHistory<Real>* history) const {
    const FieldLayout& l = layout_;
    const Acquisition& a = acquisition_;
    const int nt = problem_.nt, nrec = problem_.nrec;
    const size_t stride = l.stride;
    std::vector<Real> traces(trace_samples(), Real(0));
    std::vector<Real> u_prev(l.cells, Real(0)), u(l.cells, Real(0)), u_next(l.cells, Real(0));
    std::vector<Real> x_prev(l.cells, Real(0)), x(l.cells, Real(0)), x_next(l.cells, Real(0));
    std::vector<Real> px_prev(l.x_band_cells(), Real(0)), px(l.x_band_cells(), Real(0));
    std::vector<Real> pz_prev(l.z_band_cells(), Real(0)), pz(l.z_band_cells(), Real(0));
    if (history) {
        history->u.assign(static_cast<size_t>(nt) * l.cells, Real(0));
        history->px.assign(static_cast<size_t>(nt) * l.x_band_cells(), Real(0));
        history->pz.assign(static_cast<size_t>(nt) * l.z_band_cells(), Real(0));
    }
    const size_t source = l.index(a.source_row, a.source_col[shot]);

    for (int n = 0; n + 1 < nt; ++n) {
        for (int zp = 0; zp < l.nz_padded; ++zp)
            for (int xp = 0; xp < l.nx_padded; ++xp) {
                const size_t i = l.index(zp, xp);
                if (!l.in_layer(zp, xp)) {
                    u_next[i] = interior_update(u[i], laplacian(u.data(), i, stride), u_prev[i], courant_[i]);
                    continue;
                }
                const int xb = l.x_band_index(zp, xp), zb = l.z_band_index(zp, xp);
                const LayerForward<Real> r =
                    layer_forward(u[i], u_prev[i], x[i], x_prev[i], second_difference(u.data(), i, 1),
                                  second_difference(u.data(), i, stride), first_difference(u.data(), i, 1),
                                  first_difference(u.data(), i, stride), xb >= 0 ? px_prev[xb] : Real(0),
                                  zb >= 0 ? pz_prev[zb] : Real(0), courant_[i], columns_[xp], rows_[zp]);
                u_next[i] = r.u_next;
                x_next[i] = r.x_next;
                if (xb >= 0) px[xb] = r.px;
                if (zb >= 0) pz[zb] = r.pz;
            }
        u_next[source] += wavelet[n];  // sources lie inside the model, where the update is not divided
        for (int r = 0; r < nrec; ++r)
            traces[static_cast<size_t>(n + 1) * nrec + r] = u_next[l.index(a.receiver_row, a.receiver_col[r])];
        if (history) {
            std::copy(u_next.begin(), u_next.end(), history->u.begin() + static_cast<size_t>(n + 1) * l.cells);
            std::copy(px.begin(), px.end(), history->px.begin() + static_cast<size_t>(n) * l.x_band_cells());
            std::copy(pz.begin(), pz.end(), history->pz.begin() + static_cast<size_t>(n) * l.z_band_cells());
        }
        std::swap(u_prev, u);
        std::swap(u, u_next);
        std::swap(x_prev, x);
        std::swap(x, x_next);
        std::swap(px_prev, px);
        std::swap(pz_prev, pz);
    }
    return traces;
}

template <typename Real>
std::vector<Real> CpuPropagator<Real>::adjoint(int shot, const std::vector<Real>& residual,
                                               const ForwardHistory<Real>* history, std::vector<Real>* imaging) const {
    const FieldLayout& l = layout_;
    const Acquisition& a = acquisition_;
    const int nt = problem_.nt, nrec = problem_.nrec;
    const size_t stride = l.stride;
    // Adjoint fields (see layer_adjoint in stencil.hpp): zeta at m+2, m+1 and m; delta likewise; rho at
    // m (read) and m-1 (written). All stored fields; delta and rho stay zero outside the layer.
    std::vector<Real> zeta2(l.cells, Real(0)), zeta1(l.cells, Real(0)), zeta(l.cells, Real(0));
    std::vector<Real> delta2(l.cells, Real(0)), delta1(l.cells, Real(0)), delta(l.cells, Real(0));
    std::vector<Real> rho_x(l.cells, Real(0)), rho_z(l.cells, Real(0));
    std::vector<Real> rho_x_next(l.cells, Real(0)), rho_z_next(l.cells, Real(0));
    std::vector<Real> adjoint_source(l.cells, Real(0));  // residual spread onto the receiver cells
    std::vector<Real> wavelet_adjoint(nt, Real(0));
    const size_t source = l.index(a.source_row, a.source_col[shot]);

    for (int m = nt - 1; m >= 0; --m) {
        for (int r = 0; r < nrec; ++r)
            adjoint_source[l.index(a.receiver_row, a.receiver_col[r])] = residual[static_cast<size_t>(m) * nrec + r];
        const bool image = history && imaging && m + 1 < nt;
        const Real* u = image ? history->u.data() + static_cast<size_t>(m) * l.cells : nullptr;
        for (int zp = 0; zp < l.nz_padded; ++zp)
            for (int xp = 0; xp < l.nx_padded; ++xp) {
                const size_t i = l.index(zp, xp);
                const Real coupling = laplacian(zeta1.data(), i, stride) + adjoint_source[i] +
                                      layer_coupling(l, zp, xp, delta1.data(), rho_x.data(), rho_z.data(), i, stride);
                const Real coupled = courant_[i] * coupling;
                if (!l.in_layer(zp, xp)) {
                    zeta[i] = coupled + Real(2) * zeta1[i] - zeta2[i];
                    if (image) (*imaging)[i] += zeta1[i] * laplacian(u, i, stride);
                    continue;
                }
                const LayerAdjoint<Real> r = layer_adjoint(coupled, zeta1[i], zeta2[i], delta1[i], delta2[i], rho_x[i],
                                                           rho_z[i], columns_[xp], rows_[zp]);
                zeta[i] = r.zeta;
                delta[i] = r.delta;
                rho_x_next[i] = r.rho_x;
                rho_z_next[i] = r.rho_z;
                if (image) {
                    const int xb = l.x_band_index(zp, xp), zb = l.z_band_index(zp, xp);
                    const Real px = xb >= 0 ? history->px[static_cast<size_t>(m) * l.x_band_cells() + xb] : Real(0);
                    const Real pz = zb >= 0 ? history->pz[static_cast<size_t>(m) * l.z_band_cells() + zb] : Real(0);
                    (*imaging)[i] += (zeta1[i] + delta1[i]) * (second_difference(u, i, 1) - px) +
                                     zeta1[i] * (second_difference(u, i, stride) - pz);
                }
            }
        // Wavelet sample m drives u[m+1] at the source (an interior cell): its adjoint is lambda[m+1] there.
        if (m + 1 < nt) wavelet_adjoint[m] = zeta1[source] / courant_[source];
        std::swap(zeta2, zeta1);
        std::swap(zeta1, zeta);
        std::swap(delta2, delta1);
        std::swap(delta1, delta);
        std::swap(rho_x, rho_x_next);
        std::swap(rho_z, rho_z_next);
    }
    return wavelet_adjoint;
}

template <typename Real>
double CpuPropagator<Real>::misfit_gradient(const std::vector<int>& shots, const std::vector<Real>& observed,
                                            std::vector<float>& gradient, const ShotsDone& shots_done) const {
    const std::vector<Real> wavelet(acquisition_.wavelet.begin(), acquisition_.wavelet.end());
    std::vector<Real> imaging(layout_.cells, Real(0));
    ForwardHistory<Real> history;
    double misfit = 0.0;
    for (size_t done = 0; done < shots.size(); ++done) {
        const int shot = shots[done];
        std::vector<Real> residual = forward(shot, wavelet, &history);
        const Real* obs = observed.data() + shot * trace_samples();
        for (size_t k = 0; k < residual.size(); ++k) {
            residual[k] -= obs[k];
            misfit += 0.5 * double(residual[k]) * double(residual[k]);
        }
        adjoint(shot, residual, &history, &imaging);
        if (shots_done) shots_done(int(done) + 1);
    }
    gradient = fold_gradient(layout_, imaging, velocity_);
    return misfit;
}

template <typename Real>
std::vector<Real> CpuPropagator<Real>::model_all_shots(const ShotsDone& shots_done) const {
    const std::vector<Real> wavelet(acquisition_.wavelet.begin(), acquisition_.wavelet.end());
    std::vector<Real> traces;
    for (int shot = 0; shot < problem_.nshots; ++shot) {
        const std::vector<Real> one = forward(shot, wavelet);
        traces.insert(traces.end(), one.begin(), one.end());
        if (shots_done) shots_done(shot + 1);
    }
    return traces;
}

template class CpuPropagator<float>;
template class CpuPropagator<double>;

}  // namespace fwi
