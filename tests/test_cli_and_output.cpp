// Command-line parsing and validation, output formats and the model update: all host-side.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "cli.hpp"
#include "cuda_check.hpp"
#include "errors.hpp"
#include "host_memory.hpp"
#include "launch_env.hpp"
#include "output.hpp"
#include "problem.hpp"
#include "progress.hpp"
#include "stencil.hpp"
#include "update.hpp"

using namespace fwi;

namespace {
// Parses `args` with the problem flags and returns the UsageError message ("" when accepted).
std::string parse_error(std::vector<const char*> args) {
    args.insert(args.begin(), "test");
    try {
        Problem p = preset_from_args(int(args.size()), args.data());
        ArgParser parser("test", "");
        add_problem_flags(parser, p);
        parser.parse(int(args.size()), args.data());
        validate(p, parser);
    } catch (const UsageError& e) {
        return e.what();
    }
    return "";
}
}  // namespace

TEST_CASE("the default and named problems are valid") {
    CHECK(parse_error({}) == "");
    CHECK(parse_error({"--problem", "small"}) == "");
    CHECK(parse_error({"--problem", "large"}) == "");
    CHECK(parse_error({"--model", "anomaly", "--nx=300", "--src-x-last", "290", "--rec-x-last", "299"}) == "");
    // A true model that differs from the initial one is fine, even a constant one.
    CHECK(parse_error({"--v-top", "2000", "--v-bottom", "2000"}) == "");
    CHECK(parse_error({"--model", "anomaly", "--v-top", "1600", "--anomaly-dv", "0"}) == "");
}

TEST_CASE("bad input is rejected with a message naming the flag and the allowed range") {
    struct Case {
        std::vector<const char*> args;
        const char* expected;  // must appear in the message
    };
    const Case cases[] = {
        {{"--nx", "0"}, "--nx: 0 is out of range; allowed 16..16384"},
        {{"--nz", "-5"}, "--nz: -5 is out of range"},
        {{"--nt", "abc"}, "--nt: 'abc' is not an integer"},
        {{"--dt", "1e400"}, "--dt: 1e400 is out of range; allowed 1e-06..0.1"},
        {{"--dt", "0.002"}, "--dt: 0.002 s is unstable"},
        // Too close to 0 for a double: read as 0, below the range, not "out of range" as a huge number is.
        {{"--dt", "1e-400"}, "--dt: 1e-400 is out of range; allowed 1e-06..0.1"},
        {{"--bogus"}, "unknown flag '--bogus'"},
        {{"--nx"}, "--nx: missing value"},
        {{"--problem", "huge"}, "--problem: 'huge' is not one of default|large|small|comm"},
        {{"--model", "marmousi"}, "--model: 'marmousi' is not one of"},
        {{"--rec-depth", "384"}, "--rec-depth: 384 is outside the grid; allowed 0..383"},
        {{"--src-x-last", "600"}, "--src-x-last: 600 is outside the grid"},
        {{"--src-x-first", "100", "--src-x-last", "50"},
         "--src-x-last: 50 is below 100; allowed 100..511 (from --src-x-first"},
        {{"--nrec", "600"}, "--nrec: 600 receivers do not fit"},
        {{"--v-min", "3000"}, "--v-min: 3000 must be below --v-max (3000)"},
        {{"--delay", "5"}, "--delay: the wavelet peak must fall inside the recording; allowed 0..1.5992 s"},
        {{"--interface-depth", "400"}, "--interface-depth: 400 is outside the grid; allowed 1..383"},
        {{"--verify=1"}, "unknown flag '--verify'"},
        {{"--help=1"}, "--help: takes no value"},
        {{"--nx", "--help=1"}, "--nx: missing value"},  // not a value, as --help is not
        // A flag the user did not give, refused for the preset's value: the message says where it came from.
        {{"--nx", "256"},
         "--src-x-last: 491 is outside the grid; allowed 20..255 (from --src-x-first to nx-1) (--src-x-last was not "
         "given: it is the default problem's value)"},
        {{"--problem", "large", "--nz", "100"}, "(--interface-depth was not given: it is the large problem's value)"},
        {{"--step-size", "0"}, "--step-size: 0 is out of range; allowed 0.1..1000"},
        {{"--v-bottom", "1500"},
         "nothing to invert: the true model (--model two-layer: --v-top 1500, --v-bottom 1500) is the initial model "
         "(--v-initial 1500)"},
        {{"--model", "anomaly", "--anomaly-dv", "0"}, "nothing to invert"},
        {{"--v-top", "2000", "--v-bottom", "2000", "--v-initial", "2000"}, "nothing to invert"},
    };
    for (const Case& c : cases) {
        const std::string message = parse_error(c.args);
        INFO("args: " << c.args[0] << " -> " << message);
        CHECK(message.find(c.expected) != std::string::npos);
    }
}

TEST_CASE("a limit a refusal suggests is accepted when given back") {
    // %g rounds to the nearest six digits: 3001 m/s allows dt up to 0.001108894..., which rounds up to 0.0011089,
    // a --dt the check refuses again.
    CHECK(parse_error({"--problem", "small", "--v-top", "3001", "--v-max", "3001", "--dt", "0.1"})
              .find("= 0.00110889 s") != std::string::npos);
    CHECK(parse_error({"--problem", "small", "--v-top", "3001", "--v-max", "3001", "--dt", "0.00110889"}) == "");
    // 1500 m/s at 35 Hz: dh up to 21.42857..., which rounds up to 21.4286.
    CHECK(parse_error({"--problem", "small", "--dh", "1000"}).find("--dh at most 21.4285 m") != std::string::npos);
    CHECK(parse_error({"--problem", "small", "--dh", "21.4285", "--nt", "2000"}) == "");
    // 996 x 0.000333333 s = 0.331999668 s, which rounds up to 0.332.
    CHECK(parse_error({"--problem", "small", "--nt", "997", "--dt", "0.000333333", "--delay", "1"})
              .find("allowed 0..0.331999 s") != std::string::npos);
}

TEST_CASE("a flag given twice is refused, whichever spelling") {
    CHECK(parse_error({"--nz", "64", "--nz", "80"}) == "--nz given twice");
    CHECK(parse_error({"--nz=64", "--nz", "64"}) == "--nz given twice");
    CHECK(parse_error({"--problem", "small", "--problem", "large"}) == "--problem given twice");
    bool on = false;
    ArgParser parser("test", "");
    parser.add_switch("--verify", &on, "");
    const char* twice[] = {"test", "--verify", "--verify"};
    CHECK_THROWS_WITH_AS(parser.parse(3, twice), "--verify given twice", UsageError);
}

TEST_CASE("a value that is itself a flag, known or not, is a missing value") {
    CHECK(parse_error({"--nz", "--nx", "100"}) == "--nz: missing value (allowed 16..16384)");
    CHECK(parse_error({"--nz", "--nx=100"}).find("--nz: missing value") == 0);
    CHECK(parse_error({"--problem", "--nz", "64"}).find("--problem: missing value") == 0);
    CHECK(parse_error({"--model", "--help"}).find("--model: missing value") == 0);
    CHECK(parse_error({"--model", "-h"}).find("--model: missing value") == 0);
    // A mistyped flag is not taken for a value either; with = it is one, for the flag to judge.
    CHECK(parse_error({"--model", "--anomly"}) ==
          "--model: missing value: '--anomly' is a flag (one this program does not know), not a value; a value "
          "that starts with -- can be given as --model=<value>");
    CHECK(parse_error({"--model=--anomly"}).find("--model: missing value") == std::string::npos);
    // A negative number is a value (here refused by its range, not taken for a flag).
    CHECK(parse_error({"--nz", "-5"}).find("--nz: -5 is out of range") == 0);
}

TEST_CASE("numbers: overflow is out of range; junk, NaN and infinities name the flag and the range") {
    struct Case {
        std::vector<const char*> args;
        const char* expected;  // the whole message
    };
    const Case cases[] = {
        {{"--nz", "99999999999999999999"}, "--nz: 99999999999999999999 is out of range; allowed 16..16384"},
        {{"--nz", "-99999999999999999999"}, "--nz: -99999999999999999999 is out of range; allowed 16..16384"},
        {{"--nz", "12abc"}, "--nz: '12abc' is not an integer; allowed 16..16384"},
        {{"--nz", " 64"}, "--nz: ' 64' is not an integer; allowed 16..16384"},
        {{"--nz", ""}, "--nz: '' is not an integer; allowed 16..16384"},
        {{"--dh", "nan"}, "--dh: 'nan' is not a finite number; allowed 0.1..1000"},
        {{"--dh", "NaN"}, "--dh: 'NaN' is not a finite number; allowed 0.1..1000"},
        {{"--dh", "inf"}, "--dh: 'inf' is not a finite number; allowed 0.1..1000"},
        {{"--dh", "-infinity"}, "--dh: '-infinity' is not a finite number; allowed 0.1..1000"},
        {{"--dh", "1e999"}, "--dh: 1e999 is out of range; allowed 0.1..1000"},
        {{"--dh", "10m"}, "--dh: '10m' is not a finite number; allowed 0.1..1000"},
    };
    for (const Case& c : cases) {
        INFO("args: " << c.args[0] << " '" << c.args[1] << "'");
        CHECK(parse_error(c.args) == c.expected);
    }
}

TEST_CASE("a value a message echoes is shown on one line, control characters escaped, a long one cut") {
    // An escape sequence would reach the terminal, a newline would split the message.
    CHECK(parse_error({"--nz", "12\x1b[31m\n"}) == "--nz: '12\\x1b[31m\\x0a' is not an integer; allowed 16..16384");
    CHECK(parse_error({"--model", "two\tlayer"}).find("--model: 'two\\x09layer' is not one of") == 0);
    CHECK(shown_value("a\x7f"
                      "b") == "a\\x7fb");  // DEL, a control character too
    CHECK(shown_value("\x20~") == " ~");   // the printable range's ends are kept
    const std::string long_value(100000, '7');
    const std::string message = parse_error({"--nz", long_value.c_str()});
    CHECK(message == "--nz: " + std::string(80, '7') + "... (100000 characters) is out of range; allowed 16..16384");
    const std::string long_flag = "--" + std::string(500, 'x');
    CHECK(parse_error({long_flag.c_str()}) == "unknown flag '--" + std::string(78, 'x') + "... (502 characters)'");
}

TEST_CASE("the dispersion check counts the initial model's velocity too") {
    // A fast true model (3000 m/s: 5 cells per shortest wavelength at 40 Hz) and a slow initial one (1000 m/s:
    // 1.67 cells): the first iterations model waves in the initial model, which the grid cannot hold.
    const std::string message =
        parse_error({"--v-top", "3000", "--v-bottom", "3000", "--v-initial", "1000", "--freq", "40"});
    CHECK(message.find("--dh: 1.66 cells per shortest wavelength (slowest velocity 1000 m/s of the models") == 0);
    CHECK(parse_error({"--v-top", "3000", "--v-bottom", "3000", "--v-initial", "2000", "--freq", "40"}) == "");
}

TEST_CASE("messages show a number as it would be typed, not with six decimals") {
    CHECK(format_number(3000.0) == "3000");
    CHECK(format_number((2000 - 1) * 0.0008) == "1.5992");  // the default problem's recording, in s
    CHECK(format_number(1e-4) == "0.0001");
    CHECK(format_number(1e-6) == "1e-06");
    CHECK(format_number(-5000.0) == "-5000");
    CHECK(format_number(0.2) == "0.2");
    // A time limit keeps its tenths: --timeout 1.5 is "1.5 s", not "2 s".
    CHECK(format_seconds(1.5) == "1.5");
    CHECK(format_seconds(10.0) == "10");
    CHECK(format_seconds(27.3333) == "27.3");
    // A limit a message suggests never reads back above the limit (%g would round 21.428571 up).
    CHECK(format_at_most(21.428571) == "21.4285");
    CHECK(format_at_most(3000.0) == "3000");
    CHECK(std::strtod(format_at_most(1e-318).c_str(), nullptr) > 0.0);  // a denormal: the loop still ends
    // Counts in messages: "1 shot", never "1 shots".
    CHECK(count_of(1, "shot") == "1 shot");
    CHECK(count_of(0, "shot") == "0 shots");
    CHECK(count_of(4, "rank") == "4 ranks");
}

TEST_CASE(
    "CUDA errors of a build for other GPUs, a full or exclusive GPU, too many peers or an old driver say what to do") {
    CHECK(cuda_error_hint(cudaErrorNoKernelImageForDevice).find("cmake --preset default --fresh") != std::string::npos);
    CHECK(cuda_error_hint(cudaErrorNoKernelImageForDevice, " (compute capability 9.0)")
              .find("this build (CUDA architectures " + build_cuda_architectures() +
                    ") has no code for this GPU (compute capability 9.0); ") != std::string::npos);
    CHECK(cuda_error_hint(cudaErrorUnsupportedPtxVersion).find("update the driver") != std::string::npos);
    CHECK(cuda_error_hint(cudaErrorMemoryAllocation).find("nvidia-smi lists them") != std::string::npos);
    CHECK(cuda_error_hint(cudaErrorTooManyPeers).find("CUDA_VISIBLE_DEVICES") != std::string::npos);
    CHECK(cuda_error_hint(cudaErrorDevicesUnavailable).find("exclusive-process") != std::string::npos);
    CHECK(cuda_error_hint(cudaErrorCallRequiresNewerDriver).find("update the driver") != std::string::npos);
    CHECK(cuda_error_hint(cudaErrorLaunchFailure).empty());
    CHECK(cuda_error_hint(cudaErrorInvalidValue).empty());
}

TEST_CASE("--help stops the parse; set_prints_help(false) keeps it quiet") {
    int nz = 64;
    ArgParser parser("test", "");
    parser.add_int("--nz", &nz, 16, 16384, "");
    ArgParser::set_prints_help(false);
    const char* help_first[] = {"test", "--help", "--nz", "junk"};
    CHECK_FALSE(parser.parse(4, help_first));
    const char* error_first[] = {"test", "--nz", "junk", "-h"};
    CHECK_THROWS_AS(parser.parse(4, error_first), UsageError);
    ArgParser::set_prints_help(true);
}

TEST_CASE("a flag hidden from --help is parsed as any other") {
    std::string fault;
    int nz = 64;
    ArgParser parser("test", "");
    parser.add_int("--nz", &nz, 16, 16384, "cells");
    parser.add_string("--test-fault", &fault, "testing");
    parser.hide_from_help("--test-fault");
    CHECK(parser.help_text().find("--test-fault") == std::string::npos);
    CHECK(parser.help_text().find("--nz") != std::string::npos);
    const char* joined[] = {"test", "--test-fault=exit-before-allreduce:1", "--nz", "32"};
    CHECK(parser.parse(4, joined));
    CHECK(fault == "exit-before-allreduce:1");
    const char* twice[] = {"test", "--test-fault", "a:1", "--test-fault=b:0"};
    CHECK_THROWS_WITH_AS(parser.parse(4, twice), "--test-fault given twice", UsageError);
    const char* empty[] = {"test", "--test-fault="};
    CHECK_THROWS_WITH_AS(parser.parse(2, empty), "--test-fault: needs a non-empty value", UsageError);
    CHECK_THROWS_AS(parser.hide_from_help("--bogus"), std::logic_error);
}

TEST_CASE("a flag the run does not use is refused, by the name it was given") {
    std::string mode = "plain";
    int level = 1, size = 8;
    ArgParser parser("test", "");
    parser.add_string("--mode", &mode, "");
    parser.add_int("--level", &level, 0, 9, "");
    parser.add_int("--size", &size, 1, 64, "");
    parser.add_alias("-s", "--size");
    parser.add_used_only(
        {"--level", "--size"}, [&mode] { return mode == "fancy"; }, "with --mode fancy");
    const auto parse = [&parser](std::vector<const char*> args) {
        args.insert(args.begin(), "test");
        return parser.parse(int(args.size()), args.data());
    };
    CHECK(parse({"--mode", "fancy", "--level", "3"}));
    CHECK(parse({"--level", "3", "--mode", "fancy"}));  // the rule sees the final values, whatever the order
    CHECK(parse({"--mode", "plain"}));                  // a default is not given: nothing to refuse
    CHECK_THROWS_WITH_AS(parse({"--mode", "plain", "--level", "3"}), "--level: used only with --mode fancy",
                         UsageError);
    CHECK_THROWS_WITH_AS(parse({"--mode", "plain", "-s", "4"}), "-s (--size): used only with --mode fancy", UsageError);
    // A short alias takes its value after a space: "-s=4" is named as that mistake, not as an unknown flag.
    CHECK_THROWS_WITH_AS(parse({"--mode", "fancy", "-s=4"}), "'-s=4': a short flag takes its value after a space: -s 4",
                         UsageError);
    CHECK_THROWS_WITH_AS(parse({"-x=4"}), "unknown flag '-x=4'", UsageError);
    CHECK_THROWS_AS(parser.add_used_only(
                        {"--bogus"}, [] { return true; }, ""),
                    std::logic_error);
    CHECK_THROWS_AS(parser.add_used_only(
                        {"-s"}, [] { return true; }, ""),
                    std::logic_error);  // the flag, not an alias
}

TEST_CASE("add_problem_flags names the flags it registers") {
    Problem p;
    ArgParser parser("test", "");
    int other = 0;
    parser.add_int("--other", &other, 0, 1, "");
    const std::vector<std::string> flags = add_problem_flags(parser, p);
    CHECK(flags.front() == "--problem");
    CHECK(std::find(flags.begin(), flags.end(), "--nz") != flags.end());
    CHECK(std::find(flags.begin(), flags.end(), "--other") == flags.end());
    CHECK(flags.size() + 1 == parser.flags().size());
}

TEST_CASE("the problem's model flags are refused with the other model") {
    CHECK(parse_error({"--model", "two-layer", "--v-bottom", "2000", "--interface-depth", "100"}) == "");
    CHECK(parse_error({"--model", "anomaly", "--anomaly-dv", "100", "--anomaly-radius", "0.2"}) == "");
    CHECK(parse_error({"--model", "anomaly", "--interface-depth", "100"}) ==
          "--interface-depth: used only with --model two-layer");
    CHECK(parse_error({"--v-bottom", "2000", "--model=anomaly"}) == "--v-bottom: used only with --model two-layer");
    CHECK(parse_error({"--anomaly-radius", "0.2"}) == "--anomaly-radius: used only with --model anomaly");
}

TEST_CASE("a list of choices refuses an unknown item and an item given twice") {
    const std::vector<std::string> known{"p2p", "nccl", "host"};
    CHECK(split_choice_list("--checks", "p2p,nccl", known, "check") == std::vector<std::string>{"p2p", "nccl"});
    CHECK_THROWS_WITH_AS(split_choice_list("--checks", "p2p,nccl,p2p", known, "check"),
                         "--checks: 'p2p' is listed twice", UsageError);
    CHECK_THROWS_WITH_AS(split_choice_list("--checks", "p2p,", known, "check"),
                         "--checks: 'p2p,' has an empty item; give a comma list of p2p, nccl, host", UsageError);
    CHECK_THROWS_WITH_AS(split_choice_list("--checks", "p2p,pp2", known, "check"),
                         "--checks: unknown check 'pp2'; allowed a comma list of p2p, nccl, host", UsageError);
    CHECK_THROWS_WITH_AS(split_choice_list("--checks", "all,p2p", known, "check", "all"),
                         "--checks: 'all' stands alone, not in a list; allowed all or a comma list of p2p, nccl, host",
                         UsageError);
    CHECK(split_comma_list("FWI_TEST_NODE_OF_RANK", "0,0,1", "") == std::vector<std::string>{"0", "0", "1"});
}

TEST_CASE("find_value reads argv as parse does") {
    const auto value = [](std::vector<const char*> args) {
        args.insert(args.begin(), "test");
        return ArgParser::find_value(int(args.size()), args.data(), "--problem");
    };
    CHECK(value({"--nz", "64", "--problem", "small"}) == "small");
    CHECK(value({"--problem=large"}) == "large");
    CHECK(value({"--nz", "64"}).empty());
    CHECK(value({"--problem", "--nz", "64"}).empty());       // parse reports the missing value
    CHECK(value({"--help", "--problem", "bogus"}).empty());  // parse stops at --help
    CHECK_THROWS_WITH_AS(value({"--problem", "small", "--problem=large"}), "--problem given twice", UsageError);
}

TEST_CASE("find_switch reads argv as parse does") {
    const auto given = [](std::vector<const char*> args) {
        args.insert(args.begin(), "test");
        return ArgParser::find_switch(int(args.size()), args.data(), "--verify");
    };
    CHECK(given({"--nz", "64", "--verify"}));
    CHECK(given({"--out", "--verify"}));  // never another flag's value: parse reports --out's missing one
    CHECK_FALSE(given({"--nz", "64"}));
    CHECK_FALSE(given({"--help", "--verify"}));  // parse stops at --help
    CHECK_FALSE(given({"-h", "--verify"}));
    CHECK_FALSE(given({"--verifyx"}));
}

TEST_CASE("the CFL limit of the 8th-order stencil is 0.5546") {
    CHECK(max_stable_courant_number() == doctest::Approx(0.5546).epsilon(1e-3));
}

TEST_CASE("geometry spreads shots and receivers over distinct cells") {
    const Problem p = problem_preset("default");
    const std::vector<int> shots = shot_columns(p), receivers = receiver_columns(p);
    REQUIRE(shots.size() == 8);
    CHECK(shots.front() == 20);
    CHECK(shots.back() == 491);
    REQUIRE(receivers.size() == 128);
    CHECK(receivers.front() == 0);
    CHECK(receivers.back() == 511);
    for (size_t r = 1; r < receivers.size(); ++r) CHECK(receivers[r] > receivers[r - 1]);
}

TEST_CASE("the host memory a run needs: every shot's observed traces, and with the CPU reference its history") {
    const Problem p = problem_preset("small");  // 64 x 96, 20 absorbing cells, nt 500, 4 shots, 48 receivers
    const HostMemoryNeed fwi = host_memory_needed(p, 1, false);
    CHECK(fwi.traces == sizeof(float) * 4 * 500 * 48);
    CHECK(fwi.history == 0);
    CHECK(host_memory_needed(p, 8, false).traces == 8 * fwi.traces);  // one copy per GPU thread or rank
    const FieldLayout l = FieldLayout::make(64, 96, 20);
    const HostMemoryNeed verify = host_memory_needed(p, 1, true);
    CHECK(verify.traces == fwi.traces);
    CHECK(verify.history == sizeof(float) * 500 * (l.cells + l.x_band_cells() + l.z_band_cells()));
    CHECK(verify.total() == verify.traces + verify.history);
}

TEST_CASE("a run that cannot fit in this machine's memory is refused (exit 3), naming the flags that size it") {
    CHECK(physical_memory_bytes() > 0);
    CHECK_NOTHROW(require_host_memory(problem_preset("default"), 8));
    CHECK_NOTHROW(require_host_memory(problem_preset("small"), 1, true));
    // 16384 x 100000 x 16384 floats of traces: 100000 GiB, more than any machine has.
    Problem huge = problem_preset("default");
    huge.nshots = huge.nrec = 16384;
    huge.nt = 100000;
    const auto refusal = [&huge](bool with_cpu_reference) {
        try {
            require_host_memory(huge, 1, with_cpu_reference);
        } catch (const EnvironmentError& e) {
            return std::string(e.what());
        }
        return std::string("(accepted)");
    };
    const std::string fwi = refusal(false), verify = refusal(true);
    CHECK(fwi.find("host memory: the run needs at least 100000.0 GiB and this machine has") == 0);
    CHECK(fwi.find("--nshots x --nt x --nrec = 16384 x 100000 x 16384 floats") != std::string::npos);
    CHECK(fwi.find("--nz") == std::string::npos);  // the traces do not depend on the grid
    CHECK(verify.find("the CPU reference's wavefields of one shot at every step, --nt x the --nz x --nx grid") !=
          std::string::npos);
}

TEST_CASE("a run whose traces fit this machine once, but not once per GPU on it, is refused for the GPUs") {
    Problem p = problem_preset("default");
    p.nt = 100000;
    p.nrec = 1000;  // 400 MB of traces a shot: as many shots as fit this machine's memory once
    const size_t per_shot = sizeof(float) * p.trace_samples();
    p.nshots = static_cast<int>(std::min<size_t>(physical_memory_bytes() / per_shot, 100000));
    REQUIRE(p.nshots >= 2);
    CHECK_NOTHROW(require_host_memory(p, 1));
    try {
        require_host_memory(p, 2);
        FAIL("two GPUs' copies of the traces were accepted");
    } catch (const EnvironmentError& e) {
        const std::string text = e.what();
        CHECK(text.find("once for each of the 2 GPU threads or ranks on this machine") != std::string::npos);
        CHECK(text.find("or fewer GPUs or ranks on this machine") != std::string::npos);
    }
}

TEST_CASE(".npy files carry a valid header and the data") {
    const std::string path = "test_output_array.npy";
    const std::vector<float> data = {1.0f, -2.5f, 3.25f, 4.0f, 5.0f, 6.0f};
    write_npy(path, data.data(), {2, 3});
    std::ifstream file(path, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    std::remove(path.c_str());
    REQUIRE(bytes.size() > 10);
    CHECK(bytes.substr(1, 5) == "NUMPY");
    const size_t header_length = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
    CHECK((10 + header_length) % 64 == 0);
    CHECK(bytes.find("'shape': (2, 3)") != std::string::npos);
    CHECK(bytes.size() == 10 + header_length + data.size() * sizeof(float));
    float last = 0.0f;
    std::memcpy(&last, bytes.data() + bytes.size() - sizeof(float), sizeof(float));
    CHECK(last == 6.0f);
}

TEST_CASE("an output path must be missing or a regular file: the rename would replace anything else") {
    const auto refusal = [](const std::string& path) {
        try {
            check_writable(path, "--json");
        } catch (const UsageError& e) {
            return std::string(e.what());
        }
        return std::string("(accepted)");
    };
    const std::string folder = "test_check_writable." + std::to_string(::getpid());
    std::filesystem::create_directory(folder);
    std::ofstream(folder + "/existing.json") << "{}\n";
    REQUIRE(::mkfifo((folder + "/fifo").c_str(), 0600) == 0);
    std::filesystem::create_symlink("existing.json", folder + "/link.json");

    CHECK(refusal(folder + "/new.json") == "(accepted)");
    CHECK(refusal(folder + "/existing.json") == "(accepted)");
    CHECK(refusal("/dev/null") ==
          "--json: cannot write '/dev/null': it is not a regular file (a device, a FIFO or a socket), and the file "
          "written would replace it");
    CHECK(refusal(folder + "/fifo").find("is not a regular file") != std::string::npos);
    CHECK(refusal(folder + "/link.json").find("is a symbolic link") != std::string::npos);
    CHECK(refusal(folder).find("is a folder") != std::string::npos);
    CHECK(refusal(folder + "/existing.json/x.json") == "--json: cannot write '" + folder + "/existing.json/x.json': '" +
                                                           folder + "/existing.json' is a file, not a folder");
    // A path is shown whole, on one line: a newline in it escaped, however long it is.
    const std::string long_folder = "/no-such-folder-" + std::string(200, 'd');
    CHECK(refusal(long_folder + "/line\nbreak.json") == "--json: cannot write '" + long_folder +
                                                            "/line\\x0abreak.json': the folder '" + long_folder +
                                                            "' does not exist");
    std::filesystem::remove_all(folder);
}

TEST_CASE("a run's own files in its folder must be missing or regular files, as any output path") {
    const std::string folder = "test_run_files_replaceable." + std::to_string(::getpid());
    std::filesystem::create_directory(folder);
    std::ofstream(folder + "/final_model.npy") << "an earlier run's";
    const auto refusal = [&](const std::vector<std::string>& names) {
        try {
            check_run_files_replaceable(folder, names, "--out");
        } catch (const UsageError& e) {
            return std::string(e.what());
        }
        return std::string("(accepted)");
    };
    CHECK(refusal({"final_model.npy", "not_there.npy"}) == "(accepted)");
    std::filesystem::create_directories(folder + "/first_gradient.npy/x");
    CHECK(refusal({"final_model.npy", "first_gradient.npy"}) ==
          "--out: '" + folder +
              "/first_gradient.npy': it is a folder, and the run writes (or removes) its own "
              "first_gradient.npy there; move it away or choose another --out");
    std::filesystem::create_symlink("final_model.npy", folder + "/true_model.npy");
    CHECK(refusal({"true_model.npy"}).find("': it is a symbolic link, and the run") != std::string::npos);
    REQUIRE(::mkfifo((folder + "/loss_history.csv").c_str(), 0600) == 0);
    CHECK(refusal({"loss_history.csv"}).find("it is not a regular file") != std::string::npos);
    std::filesystem::remove_all(folder);
}

TEST_CASE("a --json file that cannot be written at the end of a run is the environment's failure, not the user's") {
    // check_writable has accepted the path before the run; what fails after it (a full disk, a folder removed
    // during the run) is no bad flag: exit 3, not 2 with a pointer to --help.
    const std::string folder = "test_write_json_file." + std::to_string(::getpid());
    std::filesystem::create_directory(folder);
    check_writable(folder + "/result.json", "--json");
    std::filesystem::remove_all(folder);
    CHECK_THROWS_WITH_AS(write_json_file(folder + "/result.json", "{}"), doctest::Contains("--json: cannot create"),
                         EnvironmentError);
}

TEST_CASE("an --out folder whose path leaves no room for the run's longest file name is refused before the run") {
    namespace fs = std::filesystem;
    const std::string base = "test_output_folder_long." + std::to_string(::getpid());
    // A path whose probe (PATH/probe.tmp.PID.N) is one character too long for PATH_MAX, where "write-test",
    // the name the check once tried, fitted with room to spare; in folders of 200 characters (a name may
    // have 255).
    const size_t length = PATH_MAX - 1 - std::strlen(kOutputFolderProbe) - temporary_name("").size();
    std::string path = base;
    while (path.size() + 1 + 200 + 2 <= length) path += "/" + std::string(200, 'd');
    path += "/" + std::string(length - path.size() - 1, 'e');
    REQUIRE(path.size() == length);
    CHECK_THROWS_WITH_AS(OutputFolder{path}, doctest::Contains("--out: "), UsageError);
    CHECK_FALSE(fs::exists(base));  // the folders it made are gone again
    std::error_code ignored;
    fs::remove_all(base, ignored);
}

TEST_CASE("an --out folder a refused run made is removed again, with its new parents, and only those") {
    namespace fs = std::filesystem;
    const fs::path base = "test_output_folder." + std::to_string(::getpid());
    fs::create_directory(base);
    {
        const OutputFolder refused((base / "new/run/").string());
        CHECK(fs::is_directory(base / "new/run"));
    }
    CHECK_FALSE(fs::exists(base / "new"));  // made for the run: gone with it
    CHECK(fs::is_directory(base));          // there before: kept
    {
        OutputFolder kept((base / "run").string());
        kept.keep();
    }
    CHECK(fs::is_directory(base / "run"));
    {
        const OutputFolder written((base / "more/run").string());
        std::ofstream(base / "more/run/true_model.npy") << "a file the run wrote";
    }
    CHECK(fs::exists(base / "more/run/true_model.npy"));  // a folder that is no longer empty stays
    std::ofstream(base / "file") << "not a folder";
    CHECK_THROWS_AS(OutputFolder((base / "file/run").string()), UsageError);
    fs::create_symlink("no-such-target", base / "dangling");  // the user's link, not a missing folder
    CHECK_THROWS_AS(OutputFolder((base / "dangling").string()), UsageError);
    CHECK(fs::is_symlink(base / "dangling"));
    { const OutputFolder through_dots((base / "up/../down").string()); }
    CHECK_FALSE(fs::exists(base / "up"));
    CHECK_FALSE(fs::exists(base / "down"));
    fs::remove_all(base);
}

namespace {
// The exit code of a forked child that ends within 20 s; -1 for one killed then (or by a signal).
int exit_code_within_20s(pid_t child) {
    int status = 0;
    pid_t ended = 0;
    for (int i = 0; i < 200 && ended == 0; ++i) {
        ended = ::waitpid(child, &status, WNOHANG);
        if (ended == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (ended == 0) {
        ::kill(child, SIGKILL);
        ::waitpid(child, &status, 0);
        return -1;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}
}  // namespace

TEST_CASE("end_process_now ends the process even while a write to standard output blocks") {
    // A child whose standard output and error are a pipe nobody reads (`2>&1 | less`, the reader gone
    // idle): its main thread blocks in a write, holding the stream's lock. Another thread then ends it with
    // its last words, as doctor's watchdog and the wait guards do; neither those words nor the flush it
    // tries may keep the process alive.
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        ::dup2(fds[1], STDOUT_FILENO);
        ::dup2(fds[1], STDERR_FILENO);
        std::thread([] {
            std::this_thread::sleep_for(std::chrono::milliseconds(200));
            end_process_now(3, "test: ending the process\n");
        }).detach();
        const std::string block(1 << 16, 'x');
        for (;;) std::fwrite(block.data(), 1, block.size(), stdout);
    }
    ::close(fds[1]);
    const int code = exit_code_within_20s(child);
    ::close(fds[0]);
    CHECK(code == 3);
}

TEST_CASE("end_process_if_late ends a process whose call hangs, and leaves alone one that returns or throws") {
    // In a child: a call that returns in time, one that throws (the watchers must stand down: the child
    // then lives past both limits), and last one that never returns, which must end the child with 3 and
    // its message.
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        ::dup2(fds[1], STDERR_FILENO);
        end_process_if_late(0.2, "test: too late (returned)\n", [] {});
        try {
            end_process_if_late(0.2, "test: too late (threw)\n", [] { throw std::runtime_error("thrown"); });
        } catch (const std::runtime_error&) {
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        end_process_if_late(0.2, "test: too late (hung)\n", [] {
            for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
        });
        std::_Exit(0);
    }
    ::close(fds[1]);
    const int code = exit_code_within_20s(child);
    std::string said(4096, '\0');
    const ssize_t got = ::read(fds[0], said.data(), said.size());
    said.resize(got > 0 ? size_t(got) : 0);
    ::close(fds[0]);
    CHECK(code == 3);
    CHECK(said == "test: too late (hung)\n");
}

TEST_CASE("every temporary name of a process is as long as the one check_writable tried") {
    // A run writes many files through temporaries (06: snapshots and the loss history before its RESULT);
    // a path whose temporary fits the file system's name limit at the check must fit it at the end too.
    const std::string first = temporary_name("result.json");
    CHECK(first.rfind("result.json.tmp." + std::to_string(::getpid()) + ".", 0) == 0);
    for (int i = 0; i < 300; ++i) CHECK(temporary_name("result.json").size() == first.size());
}

TEST_CASE("a progress report is silent in its first interval, then prints at most one line an interval") {
    ProgressReport report("CPU reference", 32.0, 30.0);
    CHECK_FALSE(report.line_at(1.0, "1 shot", 10.0));
    CHECK(report.line_at(3.0, "3 shots", 100.0) == "  CPU reference: 3 shots after 1 min 40 s, about 16 min 7 s left");
    CHECK_FALSE(report.line_at(4.0, "4 shots", 129.0));  // 29 s after the last line
    CHECK(report.line_at(32.0, "every shot", 131.0) == "  CPU reference: every shot after 2 min 11 s");
    CHECK(format_duration(59.4) == "59 s");
    CHECK(format_duration(7500.0) == "2 h 5 min");
}

TEST_CASE("RESULT objects are valid JSON") {
    JsonObject inner;
    inner.add("ok", true);
    JsonObject o;
    o.add("name", "a \"quoted\"\nline").add("count", 3).add("value", 0.5).add("missing", 1.0 / 0.0).add("inner", inner);
    CHECK(o.str() ==
          R"({"name": "a \"quoted\"\nline", "count": 3, "value": 0.5, "missing": null, "inner": {"ok": true}})");
}

TEST_CASE("JSON strings stay UTF-8: well-formed sequences are kept, any other byte becomes U+FFFD") {
    CHECK(json_quote("H\xc3\xa9l\xe2\x82\xac \xf0\x9f\x98\x80") ==
          "\"H\xc3\xa9l\xe2\x82\xac \xf0\x9f\x98\x80\"");              // é € 😀
    CHECK(json_quote("a\xff") == "\"a\\ufffd\"");                      // not a lead byte
    CHECK(json_quote("\x80x") == "\"\\ufffdx\"");                      // a stray continuation byte
    CHECK(json_quote("\xc3") == "\"\\ufffd\"");                        // truncated
    CHECK(json_quote("\xc0\xaf") == "\"\\ufffd\\ufffd\"");             // overlong '/'
    CHECK(json_quote("\xed\xa0\x80") == "\"\\ufffd\\ufffd\\ufffd\"");  // a surrogate
    CHECK(json_quote("\x01") == "\"\\u0001\"");
}

TEST_CASE("the model update is scaled, masked, clipped and deterministic") {
    Problem p = problem_preset("small");
    p.nz = 4;
    p.nx = 3;
    p.mask_rows = 1;
    p.step_size = 10.0;
    p.gradient_depth_power = 0.0;
    p.v_min = 1400.0;
    p.v_max = 1520.0;
    std::vector<float> v(12, 1500.0f);
    const std::vector<float> g = {9, 9, 9, -1, 2, 0, -4, 1, 0, 0, 0, 0.5};
    update_model(p, g, v);
    CHECK(v[0] == 1500.0f);                   // masked row
    CHECK(v[3] == doctest::Approx(1502.5f));  // -1 * (-10 / 4)
    CHECK(v[6] == 1510.0f);                   // largest |g| below the mask moves by step_size
    CHECK(v[4] == doctest::Approx(1495.0f));
    std::vector<float> again(12, 1500.0f);
    update_model(p, g, again);
    CHECK(std::memcmp(v.data(), again.data(), v.size() * sizeof(float)) == 0);
    p.step_size = 100.0;
    update_model(p, g, v);
    CHECK(v[6] == 1520.0f);  // clipped to v_max
}

TEST_CASE("the update scales the gradient by (depth / nz)^power before taking its maximum") {
    Problem p = problem_preset("small");
    p.nz = 4;
    p.nx = 1;
    p.mask_rows = 0;
    p.step_size = 10.0;
    p.gradient_depth_power = 2.0;
    std::vector<float> v(4, 1500.0f);
    update_model(p, {-8, 0, 0, -1}, v);  // scaled: -8/16 and -1: the deepest cell has the largest
    CHECK(v[3] == 1510.0f);
    CHECK(v[0] == doctest::Approx(1505.0f));
}

TEST_CASE("too few GPUs: the hint names what hides the others, not a driver that cannot reach them") {
    CHECK(too_few_gpus_hint(1, nullptr) ==
          "this machine shows CUDA 1 GPU: ask for fewer, or run on a machine with more");
    CHECK(too_few_gpus_hint(2, "0,1") ==
          "CUDA_VISIBLE_DEVICES=0,1 shows 2 GPUs: name more GPUs there, or ask for fewer");
    // A list that names more GPUs than CUDA shows (a GPU the machine does not have): not "name more".
    CHECK(too_few_gpus_hint(2, "0,1,7") ==
          "CUDA_VISIBLE_DEVICES=0,1,7 names 3, of which CUDA shows 2 GPUs: it stops at the first entry that names "
          "no GPU it can use (nvidia-smi -L lists the machine's GPUs): correct the list, or ask for fewer");
    CHECK(visible_devices_text(0, "") == "CUDA_VISIBLE_DEVICES= shows 0 GPUs");
    CHECK(too_few_gpus_hint(1, "MIG-4f1c2a9e-0000-0000-0000-000000000000,MIG-5a2b") ==
          "CUDA_VISIBLE_DEVICES names MIG instances, and CUDA shows a process at most one of them: run the multi-GPU "
          "lessons on whole GPUs");
    // A value with a control character is shown escaped, on one line.
    CHECK(too_few_gpus_hint(1, "0\n1").find("CUDA_VISIBLE_DEVICES=0\\x0a1 shows") != std::string::npos);
}
