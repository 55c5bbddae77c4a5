// The model update: deterministic, so every rank or GPU holding the same gradient computes the same
// model bit for bit.
#pragma once

#include <vector>

#include "problem.hpp"

namespace fwi {

// Preconditioned steepest descent with the step scaled by the largest magnitude: the gradient is first
// multiplied by (depth / nz)^problem.gradient_depth_power, then the cell with the largest scaled
// |gradient| changes by problem.step_size m/s and the others in proportion. The top problem.mask_rows
// rows (where the gradient is dominated by the source and receiver footprint) are left unchanged, and
// the result is clipped to [v_min, v_max]. A zero gradient leaves the model unchanged.
//
// Why the depth scaling: with sources and receivers at the surface, both wavefields lose amplitude with
// depth, so the raw gradient is largest just below the mask. A step scaled by its maximum then puts all
// its change there, and on the default problem the misfit jumps after 5 iterations and oscillates. With
// (depth/nz)^2 the misfit falls every iteration, to 6% of its first value after 20 iterations at a step
// of 40 m/s (nvidia-h100-x1, docs/PERFORMANCE.md).
void update_model(const Problem& problem, const std::vector<float>& gradient, std::vector<float>& velocity);

}  // namespace fwi
