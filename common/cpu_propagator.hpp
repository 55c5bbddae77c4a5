// The CPU reference propagator: the same discrete operators as the GPU (common/stencil.hpp), one shot
// at a time, in float (to compare with the GPU) or double (to test the adjoint to machine precision).
#pragma once

#include <functional>
#include <vector>

#include "medium.hpp"
#include "problem.hpp"

namespace fwi {

// What the gradient needs from the forward pass: every wavefield u[0..nt-1] (stored fields) and the
// layer's memory variables P[0..nt-2] (compact x and z bands).
template <typename Real>
struct ForwardHistory {
    std::vector<Real> u, px, pz;
};

template <typename Real>
class CpuPropagator {
public:
    CpuPropagator(const Problem& problem, const std::vector<float>& velocity);

    // Receiver traces [nt][nrec] of one shot fired with `wavelet` (nt samples; sample n drives the step
    // n -> n+1, so the last is unused). With `history`, also keeps what the gradient needs.
    std::vector<Real> forward(int shot, const std::vector<Real>& wavelet,
                              ForwardHistory<Real>* history = nullptr) const;

    // The adjoint of `forward` applied to `residual` [nt][nrec]. With `history` and `imaging`, adds the
    // imaging sum (dJ/dc times c, on the stored grid) to `imaging`. Returns the adjoint with respect to
    // the wavelet samples (nt values), for the dot-product test.
    std::vector<Real> adjoint(int shot, const std::vector<Real>& residual, const ForwardHistory<Real>* history,
                              std::vector<Real>* imaging) const;

    // Called after each shot with the number of shots done so far (for a progress report).
    using ShotsDone = std::function<void(int shots_done)>;

    // L2 misfit 0.5 sum (syn - obs)^2 over `shots` against observed traces (all shots, [shot][nt][nrec]),
    // and its gradient with respect to the velocity model (nz x nx).
    double misfit_gradient(const std::vector<int>& shots, const std::vector<Real>& observed,
                           std::vector<float>& gradient, const ShotsDone& shots_done = {}) const;

    // Traces of every shot with the problem's wavelet: [shot][nt][nrec].
    std::vector<Real> model_all_shots(const ShotsDone& shots_done = {}) const;

    const FieldLayout& layout() const { return layout_; }
    const Acquisition& acquisition() const { return acquisition_; }
    size_t trace_samples() const { return problem_.trace_samples(); }

private:
    Problem problem_;
    std::vector<float> velocity_;
    FieldLayout layout_;
    Acquisition acquisition_;
    std::vector<Real> courant_;
    std::vector<PmlAxis<Real>> rows_, columns_;
};

extern template class CpuPropagator<float>;
extern template class CpuPropagator<double>;

}  // namespace fwi
