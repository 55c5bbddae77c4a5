#include "cli.hpp"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "errors.hpp"

namespace fwi {

namespace {

std::string format_number(double value) {
    std::ostringstream text;
    text << value;
    return text.str();
}

long long parse_integer(const std::string& flag, const std::string& text) {
    errno = 0;
    char* end = nullptr;
    const long long value = std::strtoll(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || errno == ERANGE)
        throw UsageError(flag + ": '" + text + "' is not an integer");
    return value;
}

double parse_real(const std::string& flag, const std::string& text) {
    errno = 0;
    char* end = nullptr;
    const double value = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(value))
        throw UsageError(flag + ": '" + text + "' is not a finite number");
    return value;
}

}  // namespace

ArgParser::ArgParser(std::string program, std::string description)
    : program_(std::move(program)), description_(std::move(description)) {}

void ArgParser::add(Option option) { options_.push_back(std::move(option)); }

void ArgParser::add_int(const std::string& flag, int* target, int min, int max, const std::string& help) {
    const std::string range = std::to_string(min) + ".." + std::to_string(max);
    add({flag, help, range, true, [target] { return std::to_string(*target); },
         [=](const std::string& text) {
             const long long value = parse_integer(flag, text);
             if (value < min || value > max)
                 throw UsageError(flag + ": " + text + " is out of range; allowed " + range);
             *target = static_cast<int>(value);
         }});
}

void ArgParser::add_double(const std::string& flag, double* target, double min, double max,
                           const std::string& help) {
    const std::string range = format_number(min) + ".." + format_number(max);
    add({flag, help, range, true, [target] { return format_number(*target); },
         [=](const std::string& text) {
             const double value = parse_real(flag, text);
             if (value < min || value > max)
                 throw UsageError(flag + ": " + text + " is out of range; allowed " + range);
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

void ArgParser::add_choice(const std::string& flag, std::string* target,
                           const std::vector<std::string>& choices, const std::string& help) {
    std::string range;
    for (const auto& choice : choices) range += (range.empty() ? "" : "|") + choice;
    add({flag, help, range, true, [target] { return *target; },
         [=](const std::string& text) {
             for (const auto& choice : choices)
                 if (text == choice) {
                     *target = text;
                     return;
                 }
             throw UsageError(flag + ": '" + text + "' is not one of " + range);
         }});
}

void ArgParser::add_switch(const std::string& flag, bool* target, const std::string& help) {
    add({flag, help, "", false, [target] { return *target ? std::string("on") : std::string("off"); },
         [target](const std::string&) { *target = true; }});
}

const ArgParser::Option* ArgParser::find(const std::string& flag) const {
    for (const auto& option : options_)
        if (option.flag == flag) return &option;
    return nullptr;
}

bool ArgParser::parse(int argc, const char* const* argv) {
    for (int i = 1; i < argc; ++i) {
        std::string arg = argv[i];
        if (arg == "--help" || arg == "-h") {
            std::fputs(help_text().c_str(), stdout);
            return false;
        }
        std::string value;
        bool has_inline_value = false;
        if (const size_t eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
            value = arg.substr(eq + 1);
            arg = arg.substr(0, eq);
            has_inline_value = true;
        }
        const Option* option = find(arg);
        if (!option) throw UsageError("unknown flag '" + arg + "'");
        if (!option->takes_value) {
            if (has_inline_value) throw UsageError(arg + ": takes no value");
            option->set("");
            continue;
        }
        if (!has_inline_value) {
            if (i + 1 >= argc) throw UsageError(arg + ": missing value (allowed " + option->range + ")");
            value = argv[++i];
        }
        option->set(value);
    }
    return true;
}

std::string ArgParser::help_text() const {
    std::ostringstream out;
    out << "usage: " << program_ << " [flags]\n\n" << description_ << "\n\nflags:\n";
    for (const auto& option : options_) {
        std::string name = option.flag + (option.takes_value ? " <" + option.range + ">" : "");
        out << "  " << name;
        out << std::string(name.size() < 34 ? 34 - name.size() : 1, ' ');
        out << option.help << " (default: " << option.show() << ")\n";
    }
    out << "  --help" << std::string(28, ' ') << "print this help\n";
    return out.str();
}

std::string ArgParser::find_value(int argc, const char* const* argv, const std::string& flag) {
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == flag && i + 1 < argc) return argv[i + 1];
        if (arg.rfind(flag + "=", 0) == 0) return arg.substr(flag.size() + 1);
    }
    return "";
}

}  // namespace fwi
