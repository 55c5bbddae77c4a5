// 01_single_gpu --verify: the GPU propagator against the CPU reference on one problem (the small one
// unless --problem says otherwise): the traces of every shot, then the misfit and the gradient from the
// initial model. Prints the differences and a RESULT of kind "verify" (docs/RESULT.md); throws
// VerificationError beyond the tolerances of tolerances.hpp.
#pragma once

#include <string>

#include "problem.hpp"

namespace fwi {

int verify_against_cpu(const Problem& problem, const std::string& json_path);

}  // namespace fwi
