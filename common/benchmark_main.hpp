// BENCHMARK_MAIN with the suite's exit codes (docs/ARCHITECTURE.md), for the Google Benchmark programs
// (bench/bench_propagator, 02's bench_allreduce): 2 for an unknown flag, a value Google Benchmark would
// abort on, ignore or hang on (see benchmark_flag_problem), a --benchmark_* flag given twice, a
// --benchmark_out that cannot be written, or a --benchmark_filter that selects nothing; 3 when no GPU is
// visible (the flags are checked first; listing the benchmarks with --benchmark_list_tests needs none) or
// when a case failed (fail_benchmark_case). -h is --help.
// --benchmark_out=FILE is written as every file of the suite is: under a temporary name, renamed over
// FILE only when the benchmarks ran, so a refused run, or one that only lists them, leaves an earlier
// FILE as it was.
// Header-only: only programs that link Google Benchmark include it.
#pragma once

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <regex>
#include <string>
#include <vector>

#include "cli.hpp"
#include "device.hpp"
#include "errors.hpp"
#include "launch_env.hpp"
#include "output.hpp"
#include "run_env.hpp"

// Whether the Google Benchmark built with reads --benchmark_min_time with a unit (1.8 and newer), and its
// version: the build says, to a program that links fwi_benchmark (CMakeLists.txt).
#if !defined(FWI_BENCHMARK_MIN_TIME_UNITS) || !defined(FWI_BENCHMARK_VERSION)
#error "a Google Benchmark program links fwi_benchmark (CMakeLists.txt), which says how its version reads flags"
#endif

namespace fwi {

constexpr bool kBenchmarkMinTimeUnits = FWI_BENCHMARK_MIN_TIME_UNITS != 0;

// Skips a case that failed, with `why`, and marks the run: run_benchmarks then exits 3 once every result
// is written. A case that only does not apply here (too few GPUs, too little memory) calls
// state.SkipWithError itself and leaves the run's exit code alone.
inline bool& benchmark_case_failed() {
    static bool failed = false;
    return failed;
}
inline void fail_benchmark_case(benchmark::State& state, const char* why) {
    // Said here too: of a case with repetitions whose aggregates alone are reported, Google Benchmark leaves
    // a failed repetition out of them and prints no ERROR OCCURRED line for it.
    std::fprintf(stderr, "a benchmark case failed: %s\n", why);
    state.SkipWithError(why);
    benchmark_case_failed() = true;
}

// The value of `arg` when it is "FLAG=VALUE" (Google Benchmark's only form), else null.
inline const char* benchmark_flag_value(const std::string& arg, const char* flag) {
    const size_t n = std::strlen(flag);
    return arg.compare(0, n, flag) == 0 && arg.size() > n && arg[n] == '=' ? arg.c_str() + n + 1 : nullptr;
}

// What in `pattern` would make the regex engine take minutes or longer to match it against a case's
// name, or "" for nothing. libstdc++'s std::regex backtracks: a repeated group that varies inside
// ((.*)*, (a|b)+, (.?)*) costs time exponential in the length of the name, and so does a quantifier on a
// quantifier (.** or .*{30}); each unbounded repetition (* + {n,}) multiplies the time by the name's
// length, and eight of them took more than 20 s. Optional repetitions (? and {m,n}, which the engine
// unrolls into n - m optional copies) double it each: 20 of them (.?.?...) took 9 s on a 2-core VM, so
// at most 12 are allowed, 3 fewer for each unbounded one. A rule of thumb on the safe side: it also
// refuses a few harmless patterns, such as (ab{2})+.
inline std::string filter_backtracking_problem(const std::string& pattern) {
    constexpr int kMostUnbounded = 4, kMostOptional = 12, kOptionalPerUnbounded = 3;
    std::vector<bool> open_groups;  // for each group not yet closed: whether it repeats or alternates inside
    bool closed_group_varies = false, after_quantifier = false;
    int unbounded = 0;
    long long optional = 0;  // optional copies: 1 for each ?, n - m for each {m,n}
    for (size_t i = 0; i < pattern.size(); ++i) {
        const char c = pattern[i];
        const bool after_varying_group = closed_group_varies, on_a_quantifier = after_quantifier;
        closed_group_varies = after_quantifier = false;
        if (c == '*' || c == '+' || c == '?' || c == '{') {
            bool unbounded_here = c == '*' || c == '+';
            if (c == '?') ++optional;
            if (c == '{') {  // {n}, {n,m} or {n,}: one quantifier, up to its '}'
                const size_t close = pattern.find('}', i);
                unbounded_here = close != std::string::npos && close > i + 1 && pattern[close - 1] == ',';
                if (const size_t comma = pattern.find(',', i); !unbounded_here && comma < close) {
                    // {m,n}: at most 1000 characters, so the numbers are short; a larger n is refused below
                    const long long least = std::atoll(pattern.substr(i + 1, comma - i - 1).c_str()),
                                    most = std::atoll(pattern.substr(comma + 1, close - comma - 1).c_str());
                    optional += std::max(0LL, std::min(most, 1000000LL) - least);
                }
                i = close == std::string::npos ? pattern.size() : close;
            }
            if (on_a_quantifier) return "a quantifier on a quantifier, such as .** or .*{30}";
            if (after_varying_group && c != '?')
                return "a repeated group that repeats or alternates inside, such as (.*)* or (a|b)+";
            if (unbounded_here && ++unbounded > kMostUnbounded)
                return "more than " + std::to_string(kMostUnbounded) + " unbounded repetitions (* + {n,})";
            if (optional + kOptionalPerUnbounded * unbounded > kMostOptional)
                return "more than " + std::to_string(kMostOptional) +
                       " optional repetitions (one for each ?, n - m for each {m,n}; " +
                       std::to_string(kOptionalPerUnbounded) + " fewer for each * + {n,})";
            if (!open_groups.empty()) open_groups.back() = true;
            after_quantifier = true;
        } else if (c == '\\') {
            ++i;                // an escaped character is a plain one
        } else if (c == '[') {  // a bracket expression holds no group or repetition: skip to its end
            size_t close = i + 1;
            if (close < pattern.size() && pattern[close] == '^') ++close;
            if (close < pattern.size() && pattern[close] == ']') ++close;
            while (close < pattern.size() && pattern[close] != ']') ++close;
            i = close;
        } else if (c == '(') {
            open_groups.push_back(false);
        } else if (c == ')' && !open_groups.empty()) {
            closed_group_varies = open_groups.back();
            open_groups.pop_back();
            if (closed_group_varies && !open_groups.empty()) open_groups.back() = true;
        } else if (c == '|' && !open_groups.empty()) {
            open_groups.back() = true;
        }
    }
    return "";
}

// What is wrong with one of Google Benchmark's own flags, "" if nothing is: it aborts on a repetition
// count below 1, on CPU performance counters it was built without (1.8; 1.7 ignores them and exits 0),
// and prints its usage and exits 0 on an unknown format or time unit. A filter of some 20000 characters
// overflows the stack of the regex engine (libstdc++'s std::regex recurses per character), some make it
// backtrack for minutes or longer (filter_backtracking_problem), and an invalid one is not "a filter that
// selects nothing". Without a GPU every repetition of every case is run to count them (each skips at
// once; a million took 9 GB).
inline std::string benchmark_flag_problem(const std::string& arg) {
    const auto value_of = [&](const char* flag) { return benchmark_flag_value(arg, flag); };
    const auto one_of = [](const std::string& value, std::initializer_list<const char*> allowed) {
        return std::find(allowed.begin(), allowed.end(), value) != allowed.end();
    };
    if (const char* v = value_of("--benchmark_repetitions")) {
        char* end = nullptr;
        const long n = std::strtol(v, &end, 10);
        if (*v == '\0' || *end != '\0' || n < 1 || n > 1000) return "a whole number from 1 to 1000";
    }
    if (const char* v = value_of("--benchmark_filter")) {
        if (std::strlen(v) > 1000) return "a regular expression of at most 1000 characters";
        const std::string pattern = *v == '-' ? v + 1 : v;  // a leading '-' leaves the cases it matches out
        try {
            std::regex compiled(pattern, std::regex::extended);  // as Google Benchmark compiles it
        } catch (const std::regex_error&) {
            return "a valid (POSIX extended) regular expression";
        }
        if (const std::string problem = filter_backtracking_problem(pattern); !problem.empty())
            return "a regular expression without " + problem +
                   ", which the regex engine would take minutes or longer to match";
    }
    for (const char* flag : {"--benchmark_format", "--benchmark_out_format"})
        if (const char* v = value_of(flag))
            if (!one_of(v, {"console", "json", "csv"})) return "one of console|json|csv";
    if (const char* v = value_of("--benchmark_time_unit"))
        if (!one_of(v, {"ns", "us", "ms", "s"})) return "one of ns|us|ms|s";
    if (const char* v = value_of("--benchmark_min_time")) {
        char* end = nullptr;
        const double t = std::strtod(v, &end);
        const char unit = end != v && end[0] != '\0' && end[1] == '\0' ? end[0] : '\0';
        const bool seconds = end != v && (*end == '\0' || unit == 's') && t > 0.0 && t <= 1e6;
        const bool iterations =
            unit == 'x' && std::strspn(v, "0123456789") == std::strlen(v) - 1 && t >= 1.0 && t <= 1e9;
        if (!kBenchmarkMinTimeUnits && (seconds || iterations) && unit != '\0')
            return "a positive number of seconds without a unit: the Google Benchmark this program was built with "
                   "(" FWI_BENCHMARK_VERSION ") takes no 's' or 'x' (1.8 and newer do)";
        if (!seconds && !iterations)
            return kBenchmarkMinTimeUnits ? "a positive number of seconds (2 or 2s), or of iterations (100x)"
                                          : "a positive number of seconds";
    }
    if (const char* v = value_of("--benchmark_min_warmup_time")) {
        char* end = nullptr;
        const double t = std::strtod(v, &end);
        if (end == v || *end != '\0' || !(t >= 0.0) || t > 1e6) return "a number of seconds, 0 or more";
    }
    // Pairs as Google Benchmark splits them: from the command line it refuses others, from BENCHMARK_CONTEXT it
    // only warns and goes on.
    if (const char* v = value_of("--benchmark_context")) {
        const std::string pairs = v;
        for (size_t start = 0; !pairs.empty() && start <= pairs.size();) {
            const size_t end = std::min(pairs.find(',', start), pairs.size());
            if (std::count(pairs.begin() + long(start), pairs.begin() + long(end), '=') != 1)
                return "a comma list of KEY=VALUE pairs";
            start = end + 1;
        }
    }
    // Counters of the CPU would count the host waiting for the GPU, not the GPU work these programs time.
    if (const char* v = value_of("--benchmark_perf_counters"))
        if (*v != '\0') return "empty: CPU performance counters measure nothing of the GPU work timed here";
    // Google Benchmark takes any other word for a switch as true ("--benchmark_list_tests=maybe").
    for (const char* flag :
         {"--benchmark_list_tests", "--benchmark_display_aggregates_only", "--benchmark_report_aggregates_only",
          "--benchmark_counters_tabular", "--benchmark_enable_random_interleaving"})
        if (const char* v = value_of(flag))
            if (!one_of(v, {"true", "false", "yes", "no", "1", "0"})) return "one of true|false|yes|no|1|0";
    if (const char* v = value_of("--benchmark_color"))
        if (!one_of(v, {"auto", "true", "false", "yes", "no", "1", "0"})) return "one of auto|true|false|yes|no|1|0";
    return "";
}

// The first of Google Benchmark's flags given twice ("" if none): it would take the last one, and which
// was meant is a guess, as for the suite's own flags. --benchmark_context is the exception: each one
// adds its key=value pairs.
inline std::string repeated_benchmark_flag(int argc, char** argv) {
    std::vector<std::string> seen;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        const std::string flag = arg.substr(0, arg.find('='));
        if (flag.rfind("--benchmark_", 0) != 0 || flag == "--benchmark_context") continue;
        if (std::find(seen.begin(), seen.end(), flag) != seen.end()) return flag;
        seen.push_back(flag);
    }
    return "";
}

// Google Benchmark's --benchmark_out, written to a temporary file that replaces FILE only when benchmarks
// ran and their results were written: a run that fails or only lists the cases leaves FILE as it was.
struct BenchmarkOut {
    std::string path, temporary;  // both empty without --benchmark_out

    // Called on every way out once Google Benchmark may have opened the temporary file. It holds results
    // only when benchmarks ran: when they were only listed (--benchmark_list_tests, however Google
    // Benchmark read it) the file is empty. A run whose standard output was lost is no success either
    // (check_output_written). Returns the exit status.
    int finish(const char* program, int status) const {
        status = check_output_written(program, status);
        if (temporary.empty()) return status;
        std::FILE* file = std::fopen(temporary.c_str(), "rb");
        const bool has_results = file && std::fgetc(file) != EOF;
        if (file) std::fclose(file);
        if (status == kExitOk && has_results) {
            if (std::rename(temporary.c_str(), path.c_str()) != 0) {
                std::fprintf(stderr, "%s: environment: --benchmark_out: cannot rename '%s' into place: %s\n", program,
                             shown_path(temporary).c_str(), std::strerror(errno));
                std::remove(temporary.c_str());
                status = kExitEnvironment;
            }
        } else {
            std::remove(temporary.c_str());
        }
        return status;
    }
};

// The arguments Google Benchmark gets, in place: -h as --help, and --benchmark_out (or BENCHMARK_OUT, which
// Google Benchmark reads where the command line has none: given to it as the flag, so that the file is
// checked and written as the flag's is) naming a temporary file beside FILE. Throws UsageError for a FILE
// that cannot be written, which would otherwise end the run with Google Benchmark's "invalid file name"
// and exit 1, after the checks.
inline BenchmarkOut redirect_benchmark_out(std::vector<std::string>& args) {
    BenchmarkOut out;
    const char* out_variable = std::getenv("BENCHMARK_OUT");
    const bool out_given = std::any_of(args.begin(), args.end(), [](const std::string& arg) {
        return benchmark_flag_value(arg, "--benchmark_out") != nullptr;
    });
    const bool out_from_environment = out_variable && *out_variable && !out_given;
    if (out_from_environment) args.push_back(std::string("--benchmark_out=") + out_variable);
    const char* out_name = out_from_environment ? "BENCHMARK_OUT" : "--benchmark_out";
    for (std::string& arg : args) {
        if (arg == "-h") arg = "--help";
        const char* value = benchmark_flag_value(arg, "--benchmark_out");
        if (!value) continue;
        out.path = value;
        if (out.path.empty()) throw UsageError("--benchmark_out: needs a file name");
        check_writable(out.path, out_name);
        out.temporary = temporary_name(out.path);
        arg = "--benchmark_out=" + out.temporary;
    }
    return out;
}

// What is wrong with a value of Google Benchmark's flags (benchmark_flag_problem), on the command line or in
// the BENCHMARK_* variable Google Benchmark reads each flag from where the command line does not give it
// (BENCHMARK_FILTER for --benchmark_filter; a variable whose flag is given is not read): the message, or "".
inline std::string bad_benchmark_value(const std::vector<std::string>& args) {
    for (size_t i = 1; i < args.size(); ++i)
        if (const std::string problem = benchmark_flag_problem(args[i]); !problem.empty())
            return "'" + shown_value(args[i]) + "': the value must be " + problem;
    for (const std::string& text : environment_entries()) {
        const size_t equals = text.find('=');
        if (text.rfind("BENCHMARK_", 0) != 0 || equals == std::string::npos) continue;
        std::string flag = "--benchmark_" + text.substr(10, equals - 10);
        for (char& c : flag) c = char(std::tolower(static_cast<unsigned char>(c)));
        const bool flag_given = std::any_of(args.begin() + 1, args.end(), [&](const std::string& arg) {
            return arg == flag || arg.rfind(flag + "=", 0) == 0;
        });
        if (flag_given) continue;
        if (const std::string problem = benchmark_flag_problem(flag + text.substr(equals)); !problem.empty())
            return "environment variable " + shown_value(text) + ": the value must be " + problem;
    }
    return "";
}

// Runs the registered benchmarks; `program` and `cases` (what the filter may match, for the message)
// name them in the refusals.
inline int run_benchmarks(const char* program, const char* cases, int argc, char** argv) {
    ignore_broken_pipes();
    set_running_program_name(program);
    if (const std::string repeated = repeated_benchmark_flag(argc, argv); !repeated.empty()) {
        std::fprintf(stderr, "%s: error: %s given twice\n", program, repeated.c_str());
        return kExitBadInput;
    }
    std::vector<std::string> args(argv, argv + argc);
    BenchmarkOut out;
    try {
        out = redirect_benchmark_out(args);
    } catch (const UsageError& e) {
        std::fprintf(stderr, "%s: error: %s\n", program, e.what());
        return kExitBadInput;
    }
    if (const std::string problem = bad_benchmark_value(args); !problem.empty()) {
        std::fprintf(stderr, "%s: %s\n", program, problem.c_str());
        return kExitBadInput;
    }
    std::vector<char*> pointers;
    for (std::string& arg : args) pointers.push_back(arg.data());
    pointers.push_back(nullptr);
    argv = pointers.data();
    argc = static_cast<int>(args.size());
    // Reports nothing: without a GPU the selected cases are run only to count them (each skips at once).
    // When they are only listed, Google Benchmark prints their names and reports no context.
    class SilentReporter : public benchmark::BenchmarkReporter {
    public:
        bool ReportContext(const Context&) override { return reported = true; }
        void ReportRuns(const std::vector<Run>&) override {}
        bool reported = false;
    };
    const auto selects_nothing = [&] {
        std::fprintf(stderr, "%s: --benchmark_filter '%s' selects no benchmark; allowed a regex matching %s\n", program,
                     shown_value(benchmark::GetBenchmarkFilter()).c_str(), cases);
        return kExitBadInput;
    };
    // Google Benchmark's --help prints its usage and calls exit(0) inside Initialize. A usage that could not
    // be written is no success, as the programs' own --help (cli.cpp): checked at that exit. A reader that
    // stopped early (--help | head) took what it wanted.
    if (std::find(args.begin(), args.end(), "--help") != args.end())
        std::atexit([] {
            if (!standard_output_lost() || errno == EPIPE) return;
            std::fprintf(stderr, "%s: environment: --help: cannot write the help text to standard output\n",
                         running_program_name());
            std::_Exit(kExitEnvironment);
        });
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return kExitBadInput;
    try {  // copies started by mpirun would time each other on the same GPU
        refuse_launch_as_several_ranks("the benchmarks run on one GPU: run them without mpirun");
        // The tests' limit settings, as run_and_report reads them: a bad one refused now, not in every case.
        gpu_work_base_seconds();
        file_write_base_seconds();
    } catch (const UsageError& several) {
        std::fprintf(stderr, "%s: %s\n", program, several.what());
        return out.finish(program, kExitBadInput);
    } catch (const EnvironmentError& unreadable) {  // a launcher's variable set to no rank count
        std::fprintf(stderr, "%s: environment: %s\n", program, unreadable.what());
        return out.finish(program, kExitEnvironment);
    }
    try {
        require_gpus(1);
    } catch (const EnvironmentError& no_gpu) {  // its message tells a too old driver from no GPU at all
        SilentReporter silent;
        if (benchmark::RunSpecifiedBenchmarks(&silent) == 0) return out.finish(program, selects_nothing());
        if (!silent.reported) return out.finish(program, kExitOk);  // listed, not run: no GPU needed
        std::fprintf(stderr, "%s: environment: %s\n", program, no_gpu.what());
        return out.finish(program, kExitEnvironment);
    }
    const size_t ran = benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    if (ran == 0) return out.finish(program, selects_nothing());
    if (benchmark_case_failed()) {
        std::fprintf(stderr, "%s: environment: a case failed (its 'a benchmark case failed' line says why)\n", program);
        out.finish(program, kExitOk);  // the results of the cases that ran are still written
        return kExitEnvironment;
    }
    return out.finish(program, kExitOk);
}

}  // namespace fwi
