#include "bandwidth_verdict.hpp"

#include <cmath>
#include <cstdio>
#include <map>

#include "timing.hpp"

namespace fwi::doctor {

double median_of_measured(const Matrix& matrix, bool off_diagonal_only) {
    std::vector<double> values;
    for (int i = 0; i < matrix.n; ++i)
        for (int j = 0; j < matrix.n; ++j)
            if ((i != j || !off_diagonal_only) && !std::isnan(matrix.at(i, j))) values.push_back(matrix.at(i, j));
    return values.empty() ? kNotMeasured : median(values);
}

std::string number(double value, const char* format) {
    if (std::isnan(value)) return "n/a";
    char text[32];
    std::snprintf(text, sizeof text, format, value);
    return text;
}

namespace {
constexpr const char* kRankKind = "P2P performance rank ";  // link_kind's kind where NVML did not say
}  // namespace

std::string link_kind(const GpuSystem& system, int i, int j) {
    const size_t pairs = size_t(system.count) * system.count, at = size_t(i) * system.count + j;
    if (system.links.size() == pairs) return system.links[at].nvlinks > 0 ? "NVLink" : "PCIe " + system.links[at].pcie;
    if (system.performance_rank.size() == pairs) return kRankKind + std::to_string(system.performance_rank[at]);
    return "";
}

namespace {
// "over NVLink", "that CUDA gives P2P performance rank 0", "measured".
std::string alike_pairs(const std::string& kind) {
    if (kind.empty()) return "measured";
    return kind.rfind(kRankKind, 0) == 0 ? "that CUDA gives " + kind : "over " + kind;
}
}  // namespace

std::vector<std::string> bandwidth_problems(const GpuSystem& system, const Matrix& one_way_on,
                                            const Matrix& one_way_off) {
    // The median of each kind of link: a pair is compared with the pairs linked as it is.
    std::map<std::string, Matrix> by_kind;
    for (int i = 0; i < system.count; ++i)
        for (int j = 0; j < system.count; ++j)
            by_kind.try_emplace(link_kind(system, i, j), system.count).first->second.at(i, j) = one_way_on.at(i, j);
    std::map<std::string, double> typical_of;
    for (const auto& [kind, alike] : by_kind) typical_of[kind] = median_of_measured(alike);

    std::vector<std::string> problems;
    for (int i = 0; i < system.count; ++i)
        for (int j = 0; j < system.count; ++j) {
            const double bandwidth = one_way_on.at(i, j);
            if (i == j || std::isnan(bandwidth)) continue;
            const std::string kind = link_kind(system, i, j);
            const double typical = typical_of.at(kind);
            const std::string pair = "GPU " + std::to_string(i) + " -> GPU " + std::to_string(j) + " ";
            if (bandwidth < 0.5 * typical)
                problems.push_back(pair + number(bandwidth, "%.1f") + " GB/s, under half the median " +
                                   number(typical, "%.1f") + " GB/s of the pairs " + alike_pairs(kind));
            else if (bandwidth < 0.9 * one_way_off.at(i, j))
                problems.push_back(pair + "is slower with P2P (" + number(bandwidth, "%.1f") +
                                   " GB/s) than staged through the host (" + number(one_way_off.at(i, j), "%.1f") +
                                   " GB/s)" + why_p2p_is_slower(kind));
        }
    return problems;
}

std::string why_p2p_is_slower(const std::string& kind) {
    if (kind == "NVLink") return ": an NVLink pair should be far faster; a link may be down (`nvidia-smi nvlink -s`)";
    if (kind == "PCIe PIX" || kind == "PCIe PXB")
        return ": through a PCIe switch, P2P is usually faster; ACS on the switch may send it up to the CPU (check 6 "
               "names the ports)";
    if (kind == "PCIe PHB" || kind == "PCIe NODE" || kind == "PCIe SYS")
        return ": usual where the path goes through the CPU (" + kind.substr(5) +
               "), which staging through host memory can beat; NCCL leaves P2P over such paths out on Intel and "
               "ARM hosts but uses it on others (AMD), where NCCL_P2P_LEVEL=PXB keeps it to paths without the CPU";
    return "";  // the link is unknown: no reason to name
}

bool cross_check_fits(double bytes, double one_way_gbps, double seconds_left) {
    if (!(one_way_gbps > 0.0)) return false;  // NaN (not measured) or zero
    return 2.0 * bytes / (one_way_gbps * 1e9) <= seconds_left;
}

}  // namespace fwi::doctor
