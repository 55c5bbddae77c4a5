// A small command-line parser: every flag has a target variable (its current value is the default
// shown by --help), a help line and, for numbers, an allowed range. Bad input throws UsageError with a
// message naming the flag and the range, which run_program turns into exit code 2.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace fwi {

class ArgParser {
public:
    ArgParser(std::string program, std::string description);

    void add_int(const std::string& flag, int* target, int min, int max, const std::string& help);
    void add_double(const std::string& flag, double* target, double min, double max, const std::string& help);
    void add_string(const std::string& flag, std::string* target, const std::string& help);
    // A string flag whose value must be one of `choices`.
    void add_choice(const std::string& flag, std::string* target, const std::vector<std::string>& choices,
                    const std::string& help);
    void add_switch(const std::string& flag, bool* target, const std::string& help);

    // Parses argv[1..]. Returns false when --help was given (the help text is already printed).
    bool parse(int argc, const char* const* argv);
    std::string help_text() const;

    // The value given for `flag` on the command line, or "" when absent. Used to read a flag (like
    // --problem) that decides the defaults of the others before they are registered.
    static std::string find_value(int argc, const char* const* argv, const std::string& flag);

private:
    struct Option {
        std::string flag;
        std::string help;
        std::string range;                 // shown in help and error messages; empty for switches
        bool takes_value = true;
        std::function<std::string()> show;  // current value as text
        std::function<void(const std::string&)> set;
    };
    const Option* find(const std::string& flag) const;
    void add(Option option);

    std::string program_;
    std::string description_;
    std::vector<Option> options_;
};

}  // namespace fwi
