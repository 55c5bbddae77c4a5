// Every tolerance a result is checked with, in one table: a multi-GPU run against the single-GPU
// reference, and the GPU propagator against the CPU reference.
//
// Why these values. Every shot's contribution is computed by the same kernels in both runs; what
// differs is the order of the float32 sums (a GPU folds its batch's shots together, then the combine
// adds the GPUs' sums, where one GPU adds its batches), which moves a sum by a few ulps: measured up to
// 5e-8 relative L2 on the first gradient (every stored run of 2026-11-27 and 28; up to 3e-7 with an earlier
// propagator). Real mistakes are far larger: a missing or doubled
// shot, or an average instead of a sum, changes the gradient by more than 1e-2.
//
// The model is checked at the end of the run. Every update scales its step by the gradient's largest
// value, so each iteration carries the rounding difference into the next gradient and the two runs
// drift apart slowly: measured 4e-5 relative L2 after 20 iterations on 4 GPUs (06's run in its README),
// about 2e-8 after 3 (the 4-GPU runs in 03-05's READMEs). A wrong update (a missed or doubled step of --step-size m/s)
// moves the model by more: about 5e-3 with one update missed in 3 iterations of the small problem.
#pragma once

namespace fwi::tolerance {

constexpr double kGradient = 1e-5;  // relative L2, the first combined gradient
constexpr double kMisfit = 1e-6;    // relative, the first misfit (summed in float64)
constexpr double kModel = 1e-3;     // relative L2, the final model

// The GPU propagator against the CPU reference (01 --verify), both float32: the same operators summed
// in other orders (FMA on the GPU) over nt steps, each side inverting the traces it modelled itself
// (verify_against_cpu.cpp says why). Measured on 1 x H100: the small problem traces 3.4e-6, misfit
// 4.2e-6, gradient 1.3e-5; the default problem traces 5.8e-6, misfit 1.0e-6, gradient 1.2e-4 (the
// gradient accumulates the rounding of the forward and adjoint passes over 2000 steps).
constexpr double kCpuTraces = 1e-4;    // relative L2 of all traces together, and the misfit's relative difference
constexpr double kCpuGradient = 1e-3;  // relative L2 of the gradient

}  // namespace fwi::tolerance
