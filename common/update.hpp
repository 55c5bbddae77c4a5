// The model update: deterministic, so every rank or GPU holding the same gradient computes the same
// model bit for bit. One definition of the arithmetic serves the host (update_model, which the tests
// compare the device's with) and the device (DeviceModelUpdate in device_update.hpp, for the GPU lessons).
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "problem.hpp"
#include "stencil.hpp"  // FWI_HD

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
// of 40 m/s (1 x H100, 2026-11-22: docs/PERFORMANCE.md, "The model update"; 06's README shows 0.0596 on
// 4 x H100, 2026-11-28).
void update_model(const Problem& problem, const std::vector<float>& gradient, std::vector<float>& velocity);

// The depth weight of each row, ((z + 1) / nz)^power, computed in double on the host so that host and
// device use the same float values.
std::vector<float> depth_weights(const Problem& problem);

// The first cell the update changes (row-major): the top problem.mask_rows rows are left alone.
inline size_t first_updated_cell(const Problem& problem) {
    return static_cast<size_t>(std::min(problem.mask_rows, problem.nz)) * problem.nx;
}

// Cell i's gradient weighted by its row's depth weight (depth_weights).
FWI_HD float scaled_gradient(const float* gradient, const float* row_weights, int nx, size_t i) {
    return row_weights[i / nx] * gradient[i];
}

// One cell of the update, given the step (step_size / largest scaled |gradient|, never 0 / 0).
FWI_HD float updated_velocity(float velocity, float scaled_gradient, float step, float v_min, float v_max) {
    const float v = velocity - step * scaled_gradient;
    return v < v_min ? v_min : (v > v_max ? v_max : v);
}

}  // namespace fwi
