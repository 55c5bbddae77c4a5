// The model update: deterministic, so every rank or GPU holding the same gradient computes the same
// model bit for bit.
#pragma once

#include <vector>

#include "problem.hpp"

namespace fwi {

// Steepest descent with the step scaled by the gradient's largest magnitude: the cell with the largest
// |gradient| changes by problem.step_size m/s, the others in proportion. The top problem.mask_rows rows
// (where the gradient is dominated by the source and receiver footprint) are left unchanged, and the
// result is clipped to [v_min, v_max]. A zero gradient leaves the model unchanged.
void update_model(const Problem& problem, const std::vector<float>& gradient, std::vector<float>& velocity);

}  // namespace fwi
