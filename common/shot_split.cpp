#include "shot_split.hpp"

#include <algorithm>
#include <string>

#include "errors.hpp"

namespace fwi {

std::vector<int> ShotRange::shots() const {
    std::vector<int> list(count);
    for (int k = 0; k < count; ++k) list[k] = first + k;
    return list;
}

std::string ShotRange::text() const { return std::to_string(first) + ".." + std::to_string(first + count - 1); }

ShotRange split_shots(int nshots, int parts, int part, const std::string& what) {
    if (parts < 1 || part < 0 || part >= parts)
        throw UsageError("shot split: part " + std::to_string(part) + " of " + std::to_string(parts) +
                         " does not exist");
    if (parts > nshots)
        throw UsageError("--nshots: " + std::to_string(nshots) + " shots cannot keep " + std::to_string(parts) + " " +
                         what + " busy; use at least as many shots as " + what + " (or fewer " + what + ")");
    const int base = nshots / parts, remainder = nshots % parts;
    ShotRange range;
    range.count = base + (part < remainder ? 1 : 0);
    range.first = part * base + (part < remainder ? part : remainder);
    return range;
}

int even_batch(int shots, int most) {
    if (shots < 1 || most < 1) return 0;
    const int batches = (shots + most - 1) / most;
    return (shots + batches - 1) / batches;
}

ShotBatches plan_shot_batches(int nshots, int in_memory, int forward_in_cache, int adjoint_in_cache) {
    const int most = std::min({nshots, in_memory, std::max(1, forward_in_cache)});
    if (most < 1) return {};
    ShotBatches batches;
    batches.gradient = even_batch(nshots, most);
    batches.adjoint_most = std::min(batches.gradient, std::max(1, adjoint_in_cache));
    batches.adjoint_group = even_batch(batches.gradient, batches.adjoint_most);
    return batches;
}

}  // namespace fwi
