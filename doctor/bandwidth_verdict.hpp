// Check 4's matrices and its verdict on them, apart from the GPU work so that the verdict is unit-tested:
// which pairs copy far slower than the pairs linked alike, or slower with P2P than staged through the host.
#pragma once

#include <limits>
#include <string>
#include <vector>

#include "gpu_checks.hpp"

namespace fwi::doctor {

constexpr double kNotMeasured = std::numeric_limits<double>::quiet_NaN();

// One figure per ordered pair of GPUs (row i, column j), kNotMeasured where none was taken.
struct Matrix {
    int n = 0;
    std::vector<double> values;
    explicit Matrix(int size) : n(size), values(size_t(size) * size, kNotMeasured) {}
    double& at(int i, int j) { return values[size_t(i) * n + j]; }
    double at(int i, int j) const { return values[size_t(i) * n + j]; }
};

// The median of the measured figures (off the diagonal unless told otherwise); kNotMeasured for none.
double median_of_measured(const Matrix& matrix, bool off_diagonal_only = true);

// printf of one figure, "n/a" for kNotMeasured.
std::string number(double value, const char* format);

// How a pair is linked, for comparing it with the pairs linked alike: "NVLink" (any number of links, so
// that a pair with links down is compared with the healthy ones), "PCIe PIX" and the other PCIe paths
// (through a switch, a host bridge or across CPU sockets copies differ by design). Where NVML did not say
// (a container without NVIDIA's utility libraries), CUDA's own ranking of the pair, "P2P performance rank
// 0" (lower is faster: NVLink pairs before PCIe ones); "" where check 2 did not run either.
std::string link_kind(const GpuSystem& system, int i, int j);

// Whether --cross-check-bandwidth starts a pair: its `bytes` of copies, at the pair's one-way rate from the
// matrix (GB/s), would take at most half the `seconds_left` of the check. Past the deadline a wait is taken
// for a hung GPU, and slow links are what doctor diagnoses; an unmeasured rate is never started.
bool cross_check_fits(double bytes, double one_way_gbps, double seconds_left);

// One line per pair whose one-way P2P copy is under half the median of the pairs linked alike, or more
// than a tenth slower with P2P than staged through the host (on PCIe the two can be equal within the
// timing's noise): a degraded link or a wrong path.
std::vector<std::string> bandwidth_problems(const GpuSystem& system, const Matrix& one_way_on,
                                            const Matrix& one_way_off);
// What P2P slower than staging means on a pair linked as `kind` says (link_kind): ": ...", "" when unknown.
// Through the CPU (PHB, NODE, SYS) it is how such paths often are, and what NCCL does there depends on the
// CPU; through a PCIe switch, ACS redirecting it is the likely cause; over NVLink, a link down.
std::string why_p2p_is_slower(const std::string& kind);

}  // namespace fwi::doctor
