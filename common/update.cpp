#include "update.hpp"

#include <algorithm>
#include <cmath>

namespace fwi {

void update_model(const Problem& p, const std::vector<float>& gradient, std::vector<float>& velocity) {
    const size_t first_cell = static_cast<size_t>(std::min(p.mask_rows, p.nz)) * p.nx;
    float largest = 0.0f;  // max is exact and order-independent: the same on every rank
    for (size_t i = first_cell; i < gradient.size(); ++i) largest = std::max(largest, std::abs(gradient[i]));
    if (largest == 0.0f) return;
    const float scale = static_cast<float>(p.step_size) / largest;
    for (size_t i = first_cell; i < velocity.size(); ++i)
        velocity[i] = std::clamp(velocity[i] - scale * gradient[i], float(p.v_min), float(p.v_max));
}

}  // namespace fwi
