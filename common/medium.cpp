#include "medium.hpp"

#include <cmath>

namespace fwi {

std::vector<PmlAxis<double>> pml_profile(const Problem& p, int padded_length) {
    std::vector<PmlAxis<double>> axis(padded_length, PmlAxis<double>{0.0, 1.0, 0.0, 1.0});
    const int width = p.absorb_width;
    if (width == 0) return axis;
    const double e_max = kPmlStrength * p.v_max / (width * p.dh) * p.dt;  // eta_max dt
    const int far_start = padded_length - width;                          // first cell of the far layer
    for (int i = 0; i < padded_length; ++i) {
        // depth: cells into the layer (1..width); direction: +1 where eta grows with the index.
        int depth = 0, direction = 0;
        if (i < width) {
            depth = width - i;
            direction = -1;
        } else if (i >= far_start) {
            depth = i - far_start + 1;
            direction = 1;
        }
        if (depth == 0) continue;
        const double fraction = double(depth) / width;
        const double e = e_max * fraction * fraction;
        const double slope = direction * 2.0 * e_max * fraction / width;  // d(eta dt)/d(cell)
        const double decay = std::exp(-e);
        axis[i] = {e, decay, (1.0 - decay) / e * slope, 1.0 / (1.0 + e)};
    }
    return axis;
}

Acquisition make_acquisition(const Problem& p, const FieldLayout& l) {
    Acquisition a;
    a.source_row = p.src_depth + l.width;
    for (int x : shot_columns(p)) a.source_col.push_back(x + l.width);
    a.receiver_row = p.rec_depth + l.width;
    a.receiver_of_col.assign(l.nx_padded, -1);
    for (int x : receiver_columns(p)) {
        a.receiver_of_col[x + l.width] = static_cast<int>(a.receiver_col.size());
        a.receiver_col.push_back(x + l.width);
    }
    a.wavelet = ricker_wavelet(p);
    return a;
}

}  // namespace fwi
