#include "cli.hpp"

#include <cctype>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <stdexcept>

#include "errors.hpp"
#include "output.hpp"

namespace fwi {

namespace {

// Whether parse() prints the help text in this process (set_prints_help).
bool prints_help = true;

bool is_help(const std::string& arg) { return arg == "--help" || arg == "-h"; }

// The flag part of "--flag=value", or the whole argument.
std::string flag_name(const std::string& arg) {
    const size_t eq = arg.find('=');
    return arg.rfind("--", 0) == 0 && eq != std::string::npos ? arg.substr(0, eq) : arg;
}

// strtoll and strtod skip leading white space; a value with any is refused as a whole.
bool starts_with_space(const std::string& text) {
    return !text.empty() && std::isspace(static_cast<unsigned char>(text.front()));
}

long long parse_integer(const std::string& flag, const std::string& text, const std::string& range) {
    errno = 0;
    char* end = nullptr;
    const long long value = std::strtoll(text.c_str(), &end, 10);
    if (text.empty() || starts_with_space(text) || *end != '\0')
        throw UsageError(flag + ": '" + shown_value(text) + "' is not an integer; allowed " + range);
    if (errno == ERANGE) throw UsageError(flag + ": " + shown_value(text) + " is out of range; allowed " + range);
    return value;
}

double parse_real(const std::string& flag, const std::string& text, const std::string& range) {
    errno = 0;
    char* end = nullptr;
    const double value = std::strtod(text.c_str(), &end);
    // strtod also reads "nan", "inf" and hexadecimal ("0x1p3"): no flag has a use for them, and a NaN
    // passes every range check. A decimal number has no other characters than these.
    const bool decimal = text.find_first_not_of("0123456789.eE+-") == std::string::npos;
    if (text.empty() || !decimal || *end != '\0')
        throw UsageError(flag + ": '" + shown_value(text) + "' is not a finite number; allowed " + range);
    // ERANGE also means a number too close to 0 for a double (1e-400): strtod returns 0 or nearly, which
    // the caller's range check judges as it would 0. Only a number too large is out of range here.
    if (errno == ERANGE && std::fabs(value) > 1.0)
        throw UsageError(flag + ": " + shown_value(text) + " is out of range; allowed " + range);
    return value;
}

constexpr long long kKiB = 1024;

// A size as the flags show it: the largest of G, M, K that divides it exactly ("256M", "4", "4G").
std::string format_bytes(long long bytes) {
    for (const auto& [unit, suffix] : {std::pair{kKiB * kKiB * kKiB, "G"}, {kKiB * kKiB, "M"}, {kKiB, "K"}})
        if (bytes != 0 && bytes % unit == 0) return std::to_string(bytes / unit) + suffix;
    return std::to_string(bytes);
}

// "1M" -> 1048576: digits and an optional K, M or G (powers of 1024, either case), nothing else.
long long parse_bytes(const std::string& flag, const std::string& text, const std::string& range) {
    const std::string allowed = "; allowed " + range + " (bytes, or with K, M, G: powers of 1024)";
    errno = 0;
    char* end = nullptr;
    const long long number = std::strtoll(text.c_str(), &end, 10);
    const bool no_digits = end == text.c_str();
    long long unit = 1;
    switch (*end) {
        case '\0':
            break;
        case 'K':
        case 'k':
            unit = kKiB;
            ++end;
            break;
        case 'M':
        case 'm':
            unit = kKiB * kKiB;
            ++end;
            break;
        case 'G':
        case 'g':
            unit = kKiB * kKiB * kKiB;
            ++end;
            break;
        default:
            break;
    }
    if (text.empty() || starts_with_space(text) || no_digits || *end != '\0')
        throw UsageError(flag + ": '" + shown_value(text) + "' is not a size" + allowed);
    if (errno == ERANGE || number > LLONG_MAX / unit || number < LLONG_MIN / unit)
        throw UsageError(flag + ": " + shown_value(text) + " is out of range" + allowed);
    return number * unit;
}

// How an error names the flag as it was given: "-b (--min-bytes)" for an alias, else the flag.
std::string given_name(const std::string& name, const std::string& flag) {
    return name == flag ? flag : name + " (" + flag + ")";
}

}  // namespace

ArgParser::ArgParser(std::string program, std::string description)
    : program_(std::move(program)), description_(std::move(description)) {}

void ArgParser::add(Option option) { options_.push_back(std::move(option)); }

void ArgParser::add_int(const std::string& flag, int* target, int min, int max, const std::string& help) {
    const std::string range = std::to_string(min) + ".." + std::to_string(max);
    add({flag, help, range, true, [target] { return std::to_string(*target); },
         [=](const std::string& text) {
             const long long value = parse_integer(flag, text, range);
             if (value < min || value > max)
                 throw UsageError(flag + ": " + shown_value(text) + " is out of range; allowed " + range);
             *target = static_cast<int>(value);
         }});
}

void ArgParser::add_double(const std::string& flag, double* target, double min, double max, const std::string& help) {
    const std::string range = format_number(min) + ".." + format_number(max);
    add({flag, help, range, true, [target] { return format_number(*target); },
         [=](const std::string& text) {
             const double value = parse_real(flag, text, range);
             if (value < min || value > max)
                 throw UsageError(flag + ": " + shown_value(text) + " is out of range; allowed " + range);
             *target = value;
         }});
}

void ArgParser::add_string(const std::string& flag, std::string* target, const std::string& help) {
    add({flag, help, "text", true, [target] { return *target; },
         [=](const std::string& text) {
             if (text.empty()) throw UsageError(flag + ": needs a non-empty value");
             *target = text;
         }});
}

void ArgParser::add_choice(const std::string& flag, std::string* target, const std::vector<std::string>& choices,
                           const std::string& help) {
    std::string range;
    for (const auto& choice : choices) range += (range.empty() ? "" : "|") + choice;
    add({flag, help, range, true, [target] { return *target; },
         [=](const std::string& text) {
             for (const auto& choice : choices)
                 if (text == choice) {
                     *target = text;
                     return;
                 }
             throw UsageError(flag + ": '" + shown_value(text) + "' is not one of " + range);
         }});
}

void ArgParser::add_switch(const std::string& flag, bool* target, const std::string& help) {
    add({flag, help, "", false, [target] { return *target ? std::string("on") : std::string("off"); },
         [target](const std::string&) { *target = true; }});
}

void ArgParser::add_bytes(const std::string& flag, long long* target, long long min, long long max,
                          const std::string& help) {
    const std::string range = format_bytes(min) + ".." + format_bytes(max);
    add({flag, help, range, true, [target] { return format_bytes(*target); },
         [=](const std::string& text) {
             const long long value = parse_bytes(flag, text, range);
             if (value < min || value > max)
                 throw UsageError(flag + ": " + shown_value(text) + " is out of range; allowed " + range +
                                  " (bytes, or with K, M, G: powers of 1024)");
             *target = value;
         }});
}

void ArgParser::add_alias(const std::string& alias, const std::string& flag) {
    if (alias.empty() || alias.front() != '-' || is_help(alias) || has_flag(alias))
        throw std::logic_error("ArgParser::add_alias: '" + alias + "' is not a free flag name");
    bool registered = false;
    for (const auto& option : options_) registered = registered || option.flag == flag;
    if (!registered) throw std::logic_error("ArgParser::add_alias: no flag '" + flag + "' to alias");
    aliases_.emplace_back(alias, flag);
}

bool ArgParser::has_flag(const std::string& flag) const { return find(flag) != nullptr; }

void ArgParser::hide_from_help(const std::string& flag) {
    for (auto& option : options_)
        if (option.flag == flag) {
            option.hidden = true;
            return;
        }
    throw std::logic_error("ArgParser::hide_from_help: no flag '" + flag + "'");
}

std::vector<std::string> ArgParser::flags() const {
    std::vector<std::string> names;
    for (const auto& option : options_) names.push_back(option.flag);
    return names;
}

void ArgParser::add_used_only(const std::vector<std::string>& flags, std::function<bool()> applies,
                              const std::string& when) {
    for (const std::string& flag : flags)
        if (!find(flag) || find(flag)->flag != flag)
            throw std::logic_error("ArgParser::add_used_only: no flag '" + flag + "'");
    used_only_.push_back({flags, std::move(applies), when});
}

const ArgParser::Option* ArgParser::find(const std::string& flag) const {
    std::string name = flag;
    for (const auto& [alias, target] : aliases_)
        if (alias == flag) name = target;
    for (const auto& option : options_)
        if (option.flag == name) return &option;
    return nullptr;
}

void ArgParser::set_prints_help(bool prints) { prints_help = prints; }

bool ArgParser::is_known_flag(const std::string& arg) const {
    return is_help(flag_name(arg)) || find(flag_name(arg)) != nullptr;  // "--help=1" too
}

bool ArgParser::parse(int argc, const char* const* argv) {
    given_.clear();
    for (int i = 1; i < argc; ++i) {
        std::string arg = argv[i];
        if (is_help(arg)) {
            // A help text that cannot be written (stdout closed, or a full disk) is no success; a reader that
            // stopped early (--help | head) took what it wanted, so that error is cleared, and run_program,
            // which checks standard output at the end, sees none.
            if (prints_help && (std::fputs(help_text().c_str(), stdout) == EOF || std::fflush(stdout) != 0)) {
                if (errno != EPIPE) throw EnvironmentError("--help: cannot write the help text to standard output");
                std::clearerr(stdout);
            }
            return false;
        }
        std::string value;
        bool has_inline_value = false;
        if (const size_t eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
            value = arg.substr(eq + 1);
            arg = arg.substr(0, eq);
            has_inline_value = true;
        }
        if (is_help(arg)) throw UsageError(arg + ": takes no value");  // "--help=1"
        const Option* option = find(arg);
        if (!option) {
            // "-b=1M": a short alias written the way a long flag may be (only --flag=value is split at the =).
            const size_t eq = arg.find('=');
            if (arg.rfind("--", 0) != 0 && eq != std::string::npos && find(arg.substr(0, eq)))
                throw UsageError("'" + shown_value(arg) + "': a short flag takes its value after a space: " +
                                 arg.substr(0, eq) + " " + shown_value(arg.substr(eq + 1)));
            throw UsageError("unknown flag '" + shown_value(arg) + "'");
        }
        // Two values for one flag: which one was meant is a guess, so neither is taken. A flag and its
        // alias are one flag.
        if (const auto [earlier, first] = given_.emplace(option->flag, arg); !first)
            throw UsageError(earlier->second == arg
                                 ? arg + " given twice"
                                 : option->flag + " given twice (as " + earlier->second + " and " + arg + ")");
        const std::string name = given_name(arg, option->flag);
        if (!option->takes_value) {
            if (has_inline_value) throw UsageError(name + ": takes no value");
            option->set("");
            continue;
        }
        if (!has_inline_value) {
            // "--nz --nx 100" forgot the value of --nz; taking "--nx" as it would hide the mistake (and
            // "--json --help" would be a file name on one reading and a request for help on another). A
            // mistyped flag is no value either: "--out --no-plto" would make a folder named "--no-plto".
            if (i + 1 >= argc || is_known_flag(argv[i + 1]))
                throw UsageError(name + ": missing value (allowed " + option->range + ")");
            if (std::string(argv[i + 1]).rfind("--", 0) == 0)
                throw UsageError(name + ": missing value: '" + shown_value(argv[i + 1]) +
                                 "' is a flag (one this program does not know), not a value; a value that starts "
                                 "with -- can be given as " +
                                 name + "=<value>");
            value = argv[++i];
        }
        try {
            option->set(value);
        } catch (const UsageError& e) {
            // The option's message names its flag; the user typed the alias.
            const std::string message = e.what();
            if (name == option->flag || message.rfind(option->flag + ":", 0) != 0) throw;
            throw UsageError(name + message.substr(option->flag.size()));
        }
    }
    for (const UsedOnly& rule : used_only_)
        for (const std::string& flag : rule.flags)
            if (const auto found = given_.find(flag); found != given_.end() && !rule.applies())
                throw UsageError(given_name(found->second, flag) + ": used only " + rule.when);
    return true;
}

std::string ArgParser::help_text() const {
    std::ostringstream out;
    out << "usage: " << program_ << " [flags]\n\n" << description_ << "\n\nflags:\n";
    for (const auto& option : options_) {
        if (option.hidden) continue;
        std::string name = option.flag + (option.takes_value ? " <" + option.range + ">" : "");
        for (const auto& [alias, flag] : aliases_)
            if (flag == option.flag) name = alias + ", " + name;
        out << "  " << name;
        out << std::string(name.size() < 34 ? 34 - name.size() : 1, ' ');
        out << option.help << " (default: " << option.show() << ")\n";
    }
    out << "  --help" << std::string(28, ' ') << "print this help\n";
    return out.str();
}

bool ArgParser::was_given(const std::string& flag) const {
    const Option* option = find(flag);
    return option && given_.count(option->flag) != 0;
}

std::string ArgParser::find_value(int argc, const char* const* argv, const std::string& flag) {
    // Reads argv the way parse() will, so that the defaults picked from the value are the ones parse()
    // then overrides: nothing after --help counts, a repeated flag is refused, and a value that looks
    // like a flag is no value (parse() reports it).
    std::string found;
    bool seen = false;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (is_help(arg)) break;
        if (flag_name(arg) != flag) continue;
        if (seen) throw UsageError(flag + " given twice");
        seen = true;
        if (arg.size() > flag.size())
            found = arg.substr(flag.size() + 1);
        else if (i + 1 < argc && std::string(argv[i + 1]).rfind("--", 0) != 0 && !is_help(argv[i + 1]))
            found = argv[++i];
    }
    return found;
}

bool ArgParser::find_switch(int argc, const char* const* argv, const std::string& flag) {
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (is_help(arg)) return false;           // as in find_value: nothing after --help counts
        if (flag_name(arg) == flag) return true;  // never another flag's value (parse() says so)
    }
    return false;
}

std::vector<std::string> split_comma_list(const std::string& flag, const std::string& text,
                                          const std::string& allowed) {
    std::vector<std::string> items;
    size_t start = 0;
    while (true) {
        const size_t comma = text.find(',', start);
        items.push_back(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
        if (items.back().empty())
            throw UsageError(flag + ": '" + shown_value(text) + "' " +
                             (text.empty() ? "is empty" : "has an empty item") + "; give " + allowed);
        if (comma == std::string::npos) return items;
        start = comma + 1;
    }
}

std::vector<std::string> split_choice_list(const std::string& flag, const std::string& text,
                                           const std::vector<std::string>& known, const std::string& what,
                                           const std::string& alone) {
    const std::string allowed = (alone.empty() ? "" : alone + " or ") + "a comma list of " + join(known, ", ");
    const std::vector<std::string> items = split_comma_list(flag, text, allowed);
    for (size_t i = 0; i < items.size(); ++i) {
        if (!alone.empty() && items[i] == alone)
            throw UsageError(flag + ": '" + alone + "' stands alone, not in a list; allowed " + allowed);
        if (std::find(known.begin(), known.end(), items[i]) == known.end())
            throw UsageError(flag + ": unknown " + what + " '" + shown_value(items[i]) + "'; allowed " + allowed);
        for (size_t j = 0; j < i; ++j)
            if (items[i] == items[j]) throw UsageError(flag + ": '" + shown_value(items[i]) + "' is listed twice");
    }
    return items;
}

}  // namespace fwi
