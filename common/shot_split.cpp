#include "shot_split.hpp"

#include <string>

#include "errors.hpp"

namespace fwi {

std::vector<int> ShotRange::shots() const {
    std::vector<int> list(count);
    for (int k = 0; k < count; ++k) list[k] = first + k;
    return list;
}

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

}  // namespace fwi
