// Sources and receivers as far above the bottom edge as the presets put them below the top one: how the
// tests reach the bottom of the absorbing layer. With them at the top, as in every preset, a test's waves
// barely reach the bottom layer and come back within its time steps, so an error there (in the adjoint, or
// in the gradient's share of the layer) would move the dot-product test, the Taylor test and the GPU's
// match with the CPU by less than they can see.
#pragma once

#include "problem.hpp"

namespace fwi {

inline Problem near_the_bottom(Problem p) {
    p.src_depth = p.nz - 1 - p.src_depth;
    p.rec_depth = p.nz - 1 - p.rec_depth;
    validate(p);
    return p;
}

}  // namespace fwi
