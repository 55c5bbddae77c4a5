#include "p2p_pattern.hpp"

namespace fwi::doctor {

PatternCheck check_pattern(const uint32_t* data, size_t words, int source_gpu) {
    PatternCheck check;
    check.words = words;
    for (size_t i = 0; i < words; ++i) {
        if (data[i] == pattern_word(source_gpu, i)) continue;
        if (check.wrong++ == 0) check.first_wrong = i;
        check.zeros += data[i] == 0;
        check.untouched += data[i] == kPoisonWord;
    }
    return check;
}

std::string describe(const PatternCheck& check) {
    if (check.ok()) return "ok";
    const std::string all = std::to_string(check.words);
    if (check.zeros == check.words) return "all " + all + " words are zero";
    if (check.untouched == check.words) return "nothing arrived (all " + all + " words unchanged)";
    std::string text = std::to_string(check.wrong) + " of " + all + " words wrong";
    if (check.zeros)
        text += " (" + std::to_string(check.zeros) + " zero)";
    else if (check.untouched)
        text += " (" + std::to_string(check.untouched) + " unchanged)";
    return text + ", first at word " + std::to_string(check.first_wrong);
}

}  // namespace fwi::doctor
