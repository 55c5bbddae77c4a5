#include "update.hpp"

#include <algorithm>
#include <cmath>

namespace fwi {

std::vector<float> depth_weights(const Problem& p) {
    std::vector<float> weights(p.nz);
    for (int z = 0; z < p.nz; ++z)
        weights[z] = static_cast<float>(std::pow(double(z + 1) / p.nz, p.gradient_depth_power));
    return weights;
}

void update_model(const Problem& p, const std::vector<float>& gradient, std::vector<float>& velocity) {
    const size_t first = first_updated_cell(p);
    const std::vector<float> row_weights = depth_weights(p);
    std::vector<float> scaled(gradient.size(), 0.0f);
    float largest = 0.0f;  // max is exact and order-independent: the same on every rank
    for (size_t i = first; i < gradient.size(); ++i) {
        scaled[i] = scaled_gradient(gradient.data(), row_weights.data(), p.nx, i);
        largest = std::max(largest, std::abs(scaled[i]));
    }
    if (largest == 0.0f) return;
    const float step = static_cast<float>(p.step_size) / largest;
    for (size_t i = first; i < velocity.size(); ++i)
        velocity[i] = updated_velocity(velocity[i], scaled[i], step, float(p.v_min), float(p.v_max));
}

}  // namespace fwi
