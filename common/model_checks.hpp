// Whether a velocity model is one the propagator and the update can run: finite, positive, inside the
// range the update keeps the model in, and slow enough for the time step. validate() checks the models
// the flags define; check_resume checks a checkpoint's model, which no flag range has seen. During a run,
// require_finite_model checks that the update kept the model finite.
#pragma once

#include <string>
#include <vector>

#include "problem.hpp"

namespace fwi {

// Throws UsageError (exit 2) unless `model` has problem.model_cells() cells and every one is finite,
// positive, stable (check_stable) and within --v-min..--v-max. `source` names the model and the flags or
// file it comes from, e.g. "the initial model (--v-initial 1500)"; each message names it, the offending
// cell and the limit.
void check_model(const Problem& problem, const std::vector<float>& model, const std::string& source);

// Throws UsageError naming --dt, `source` and the limit when `velocity` (m/s) is beyond the CFL limit of
// the 8th-order stencil with leapfrog time stepping at the problem's --dt and --dh.
void check_stable(const Problem& problem, double velocity, const std::string& source);

// Throws VerificationError (exit 1) naming `iteration` and the first non-finite cell unless every cell of
// `model` (the model after that iteration's update) is finite. The loop checks each iteration's misfit,
// which is that of the model before its update: a non-finite update (from a non-finite gradient) shows
// only in the model itself, which no checkpoint, output file or comparison may take.
void require_finite_model(const Problem& problem, const std::vector<float>& model, int iteration);

// Throws VerificationError (exit 1) naming `which` (e.g. "the first gradient") and the first non-finite
// cell unless every cell of `gradient` is finite. The update cannot be relied on to show it: it leaves the
// top --mask-rows rows (the sources and receivers) alone and scales its step by the largest finite value,
// so a NaN there, or a gradient of NaN alone, leaves the model and the misfit as they were.
void require_finite_gradient(const Problem& problem, const std::vector<float>& gradient, const std::string& which);

}  // namespace fwi
