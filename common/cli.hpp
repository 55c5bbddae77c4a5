// A small command-line parser: every flag has a target variable (its current value is the default
// shown by --help), a help line and, for numbers, an allowed range. Bad input throws UsageError with a
// message naming the flag and the range, which run_program turns into exit code 2.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <utility>
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
    // A size in bytes, 64-bit: an integer with an optional suffix K, M or G (either case; powers of 1024,
    // as nccl-tests reads -b/-e): "1M" is 1048576. min and max are shown the same way ("4..64G").
    void add_bytes(const std::string& flag, long long* target, long long min, long long max, const std::string& help);
    // A second name for the registered `flag` (nccl-tests' "-b" for "--min-bytes"): the same option, so
    // giving both counts as giving it twice; errors name both ("-b (--min-bytes): ..."). A value is never
    // written into an alias ("-b 1M", not "-b=1M"). Throws std::logic_error for an unknown flag or a name
    // already taken.
    void add_alias(const std::string& alias, const std::string& flag);
    // Leaves the registered `flag` out of --help, parsed as ever: for a flag of the suite's own tests
    // (05's --test-fault), which its README documents. Throws std::logic_error for an unknown flag.
    void hide_from_help(const std::string& flag);
    // Whether `flag` is registered (as a flag or an alias).
    bool has_flag(const std::string& flag) const;
    // The registered flags, in the order they were added (no aliases).
    std::vector<std::string> flags() const;
    // A rule parse() checks last, once every value is set: each of `flags` given on the command line
    // must be one this run uses, as `applies` says; if not, UsageError "<flag>: used only <when>". A
    // flag the run would ignore usually means that something else was meant (--interface-depth with
    // --model anomaly), so it is refused rather than dropped. Throws std::logic_error for an unknown flag.
    void add_used_only(const std::vector<std::string>& flags, std::function<bool()> applies, const std::string& when);

    // Parses argv[1..] from left to right. Returns false when --help (or -h) comes before any error (the
    // help text is printed, unless set_prints_help(false)). Refused with UsageError: an unknown flag, a
    // flag given twice, a missing value (the next argument is a flag, known or not: "--nz --nx 100",
    // "--out --no-plto"; a value that starts with -- can still be given as --flag=value), a value
    // that is not of the flag's type or outside its range (NaN and infinities never are), a flag this
    // run does not use (add_used_only). The result depends on argv alone, so every MPI rank parsing the
    // same argv gets the same answer.
    bool parse(int argc, const char* const* argv);
    std::string help_text() const;
    // Whether `flag` (by its flag or an alias) was given to the last parse().
    bool was_given(const std::string& flag) const;

    // The value given for `flag` on the command line, or "" when absent or missing. Used to read a flag
    // (like --problem) that decides the defaults of the others before they are registered; it agrees
    // with parse(): arguments after --help are not read, and a repeated flag throws UsageError. It knows
    // no aliases: use it only for flags that have none.
    static std::string find_value(int argc, const char* const* argv, const std::string& flag);
    // Whether the switch `flag` is on the command line, read likewise (before --help, never as another
    // flag's value).
    static bool find_switch(int argc, const char* const* argv, const std::string& flag);

    // Whether parse() prints the help text in this process (default yes). run_mpi_program turns it off
    // on every rank but 0: each rank still sees --help and returns, and the text is printed once.
    static void set_prints_help(bool prints);

private:
    struct UsedOnly {
        std::vector<std::string> flags;
        std::function<bool()> applies;
        std::string when;
    };
    struct Option {
        std::string flag;
        std::string help;
        std::string range;  // shown in help and error messages; empty for switches
        bool takes_value = true;
        std::function<std::string()> show;  // current value as text
        std::function<void(const std::string&)> set;
        bool hidden = false;  // left out of --help (hide_from_help)
    };
    // The option named `flag`, by its flag or its alias.
    const Option* find(const std::string& flag) const;
    // A registered flag (alone or as "--flag=value"), --help or -h.
    bool is_known_flag(const std::string& arg) const;
    void add(Option option);

    std::string program_;
    std::string description_;
    std::vector<Option> options_;
    std::vector<std::pair<std::string, std::string>> aliases_;  // (alias, flag)
    std::vector<UsedOnly> used_only_;
    std::map<std::string, std::string> given_;  // option's flag -> the name parse() was given it by
};

// The items of a comma list given to `flag` ("a,b" -> {"a", "b"}). An empty list or an empty item (",a",
// "a,", "a,,b") throws UsageError naming the flag and `allowed`: a stray comma usually means that a name
// was left out, and is not quietly dropped.
std::vector<std::string> split_comma_list(const std::string& flag, const std::string& text, const std::string& allowed);
// The same for a list of choices: an item that is not one of `known` is refused ("--variants: unknown
// variant 'rign'; allowed a comma list of via_gpu0, ring, ...", `what` naming the kind of item), and so
// is an item given twice ("ring,ring"), which would run the same thing twice under one name. `alone`,
// where given, is the word that stands for every choice ("all"): the caller takes it by itself, and in a
// list it is refused as such rather than as unknown. The messages name what is allowed from `known` and
// `alone`.
std::vector<std::string> split_choice_list(const std::string& flag, const std::string& text,
                                           const std::vector<std::string>& known, const std::string& what,
                                           const std::string& alone = "");

}  // namespace fwi
