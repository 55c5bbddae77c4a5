// doctor's logic that needs no GPU: the findings' text and JSON, the exit code they add up to, and the
// parsers and diagnoses built from what the host, NCCL's log and the P2P data say.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "bandwidth_verdict.hpp"
#include "cuda_check.hpp"
#include "errors.hpp"
#include "gpu_checks.hpp"
#include "host.hpp"
#include "mpi_checks.hpp"
#include "nccl_allreduce.hpp"
#include "nccl_log.hpp"
#include "nccl_verdict.hpp"
#include "p2p_pattern.hpp"
#include "report.hpp"
#include "run_env.hpp"
#include "timing.hpp"
#include "watchdog.hpp"

using namespace fwi;
using namespace fwi::doctor;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

Finding finding_with(const std::string& id, Status status) {
    Finding finding;
    finding.id = id;
    finding.status = status;
    finding.summary = std::string(status_name(status)) + " summary";
    return finding;
}

}  // namespace

TEST_CASE("a finding prints its verdict, its details, then what to try") {
    Finding finding = finding_with("p2p", Status::fail);
    finding.details = {"line one", "line two"};
    finding.next = "boot with iommu=pt";
    const std::string text = format_finding(finding);
    CHECK(text == "  FAIL  FAIL summary\n        line one\n        line two\n        try: boot with iommu=pt\n");
    CHECK(format_finding(skipped("mpi", "not run")) == "  SKIP  not run\n");
}

TEST_CASE("a GPU matrix has a header row and one row per GPU, columns right-aligned") {
    const auto lines = format_matrix(2, "", 6, [](int i, int j) { return i == j ? "X" : "NV18"; });
    REQUIRE(lines.size() == 3);
    CHECK(lines[0] == "        GPU0  GPU1");
    CHECK(lines[1] == "  GPU0     X  NV18");
    CHECK(lines[2] == "  GPU1  NV18     X");
    // A cell longer than the width widens every column: they stay aligned.
    const auto wide = format_matrix(
        2, "", 6, [](int i, int j) { return i == j ? "X" : "NET/Socket+P2P"; }, "rank");
    CHECK(wide[0] == "                         rank0          rank1");
    CHECK(wide[1] == "          rank0              X NET/Socket+P2P");
}

TEST_CASE("matrix JSON is nested objects keyed by GPU, with the diagonal only when asked") {
    CHECK(matrix_json(2, false, [](int i, int j) { return i * 10 + j; }).str() == R"({"0": {"1": 1}, "1": {"0": 10}})");
    CHECK(matrix_json(1, true, [](int, int) { return 2.5; }).str() == R"({"0": {"0": 2.5}})");
}

TEST_CASE("checks are numbered in order and unknown ids are refused") {
    CHECK(all_checks().size() == 7);
    CHECK(check_number("devices") == 1);
    CHECK(check_number("mpi") == 7);
    CHECK_THROWS(check_number("frobnicate"));
}

TEST_CASE("the exit code: 0 with warnings and skips, 1 with a failure, 3 without a GPU") {
    Report report(true, "", "single-process");
    report.add(finding_with("devices", Status::pass));
    report.add(finding_with("host", Status::warn));
    report.add(finding_with("mpi", Status::skip));
    CHECK(report.exit_code() == kExitOk);
    report.add(finding_with("p2p", Status::fail));
    CHECK(report.exit_code() == kExitVerificationFailed);
    report.set_no_gpu();
    CHECK(report.exit_code() == kExitEnvironment);
}

TEST_CASE("the JSON holds every check with its verdict, explanation and facts, and the counts") {
    const std::string path = "doctor_test_report.json";
    Report report(false, path, "single-process");
    report.set_fact("gpus", 4);
    Finding devices = finding_with("devices", Status::pass);
    devices.facts.add("runtime_version", 13000);
    report.add(devices);
    Finding nccl = finding_with("nccl", Status::fail);
    nccl.next = "retry with NCCL_P2P_DISABLE=1";
    nccl.details = {"a", "b"};
    report.add(nccl);
    CHECK(report.finish() == kExitVerificationFailed);

    std::ifstream file(path);
    std::stringstream text;
    text << file.rdbuf();
    const std::string json = text.str();
    std::remove(path.c_str());
    CHECK(contains(json, R"("program": "doctor")"));
    CHECK(contains(json, R"("status": "failed", "exit_code": 1)"));
    CHECK(contains(json, R"("gpus": 4)"));
    CHECK(contains(json, R"("pass": 1, "warn": 0, "fail": 1, "skip": 0)"));
    CHECK(contains(json, R"("devices": {"number": 1, "title": "driver, runtime and devices", "status": "PASS")"));
    CHECK(contains(json, R"("facts": {"runtime_version": 13000})"));
    CHECK(contains(json, R"("next": "retry with NCCL_P2P_DISABLE=1", "details": "a\nb\n")"));
}

TEST_CASE("the JSON file is replaced whole, as every file the suite writes, never written into in place") {
    // A second name (a hard link) for the old file keeps the old bytes only when the new file is renamed over
    // the path; a writer that truncates and writes in place would change both names at once.
    const std::string path = "doctor_test_replaced.json", second_name = "doctor_test_second_name.json";
    std::ofstream(path) << "an earlier run's findings\n";
    std::remove(second_name.c_str());
    REQUIRE(::link(path.c_str(), second_name.c_str()) == 0);
    Report report(false, path, "single-process");
    report.add(finding_with("devices", Status::pass));
    CHECK(report.finish() == kExitOk);
    const auto read = [](const std::string& name) {
        std::ifstream file(name);
        std::stringstream text;
        text << file.rdbuf();
        return text.str();
    };
    const std::string written = read(path), kept = read(second_name);
    std::remove(path.c_str());
    std::remove(second_name.c_str());
    CHECK(contains(written, R"("program": "doctor")"));
    CHECK(kept == "an earlier run's findings\n");
}

namespace {

// Runs check `id` stuck for 30 s under a watchdog of `seconds`, in a child process (the watchdog ends the
// process), and returns the child's exit code. The report is printed and written to `json_path` when one
// is given, else quiet; `before` runs on the report before the check starts, and begins it unless
// `before` begins another (a check run ahead of its turn). `stdout_path`: where the child prints.
int stuck_run_exit_code(const std::string& id, double seconds, bool no_gpu, const std::string& json_path,
                        const std::function<void(Report&)>& before = {}, bool begin_it = true,
                        const std::string& stdout_path = "") {
    const pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        if (!stdout_path.empty() && !std::freopen(stdout_path.c_str(), "w", stdout)) std::_Exit(99);
        Report report(json_path.empty(), json_path, "single-process");
        if (no_gpu) report.set_no_gpu();
        if (before) before(report);
        Watchdog watchdog(report);
        if (begin_it) report.begin(id);
        watchdog.arm(id, seconds);
        std::this_thread::sleep_for(std::chrono::seconds(30));
        std::_Exit(0);  // not reached when the watchdog works
    }
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    REQUIRE(WIFEXITED(status));
    return WEXITSTATUS(status);
}

}  // namespace

TEST_CASE("the watchdog ends a run stuck in a check with exit code 1 after its time, the JSON written") {
    const std::string path = "doctor_test_watchdog.json";
    const HostTimer timer;
    CHECK(stuck_run_exit_code("nccl", 0.3, false, path) == kExitVerificationFailed);
    CHECK(timer.seconds() < 10.0);
    std::ifstream file(path);
    std::stringstream text;
    text << file.rdbuf();
    std::remove(path.c_str());
    CHECK(contains(text.str(), R"("nccl": {"number": 5)"));
    CHECK(contains(text.str(), "did not finish within 0.3 s"));
}

// The text of file `path`, which is then removed.
std::string read_and_remove(const std::string& path) {
    std::ifstream file(path);
    std::stringstream text;
    text << file.rdbuf();
    std::remove(path.c_str());
    return text.str();
}

TEST_CASE("a stuck run reports the finding held for a later check (check 6, made before the GPU checks), once") {
    Finding host = finding_with("host", Status::warn);
    host.summary = "ACS on 1 switch port between the GPUs";
    const std::string path = "doctor_test_watchdog_held.json";
    CHECK(stuck_run_exit_code("p2p", 0.2, false, path, [&](Report& report) { report.hold(host); }) ==
          kExitVerificationFailed);
    const std::string held = read_and_remove(path);
    CHECK(contains(held, R"("host": {"number": 6)"));
    CHECK(contains(held, "ACS on 1 switch port between the GPUs"));
    // Held, then added in its turn before a later check got stuck: reported once.
    CHECK(stuck_run_exit_code("nccl", 0.2, false, path, [&](Report& report) {
              report.hold(host);
              report.add(host);
          }) == kExitVerificationFailed);
    const std::string added = read_and_remove(path);
    const size_t first = added.find("ACS on 1 switch port");
    REQUIRE(first != std::string::npos);
    CHECK(added.find("ACS on 1 switch port", first + 1) == std::string::npos);
}

TEST_CASE("a check stuck ahead of its turn is reported under its own heading, not the last one printed") {
    const std::string path = "doctor_test_watchdog_ahead.json", printed = "doctor_test_watchdog_ahead.txt";
    CHECK(stuck_run_exit_code(
              "host", 0.2, false, path, [](Report& report) { report.begin("topology"); }, false, printed) ==
          kExitVerificationFailed);
    std::remove(path.c_str());
    const std::string text = read_and_remove(printed);
    const size_t topology = text.find("[2/7]"), host = text.find("[6/7]"), stuck = text.find("did not finish");
    REQUIRE(topology != std::string::npos);
    REQUIRE(stuck != std::string::npos);
    CHECK(host != std::string::npos);
    CHECK(topology < host);
    CHECK(host < stuck);
    CHECK(contains(text, "the checks not reported here did not run"));
}

TEST_CASE("a stuck run whose --json cannot be written ends with exit code 3, as a run that was not stuck does") {
    CHECK(stuck_run_exit_code("nccl", 0.2, false, "/proc/doctor_test_watchdog.json") == kExitEnvironment);
}

TEST_CASE("a stuck run on a machine without a GPU ends with exit code 3, the code its summary names") {
    CHECK(stuck_run_exit_code("host", 0.2, true, "") == kExitEnvironment);  // check 6 after check 1 found no GPU
}

TEST_CASE("the watchdog's advice reruns a stuck check as doctor takes it") {
    const std::vector<std::string> selectable = selectable_checks();
    CHECK(selectable == std::vector<std::string>{"p2p", "bandwidth", "nccl", "host", "mpi"});
    for (const CheckInfo& check : all_checks()) {
        const std::string advice = rerun_stuck_check_advice(check.id);
        CAPTURE(advice);
        // Every --checks it names is one doctor takes (not devices or topology, which always run).
        for (size_t at = advice.find("--checks "); at != std::string::npos; at = advice.find("--checks ", at + 1)) {
            const std::string named = advice.substr(at + 9, advice.find_first_of(" ,;)", at + 9) - (at + 9));
            CHECK(std::find(selectable.begin(), selectable.end(), named) != selectable.end());
        }
        if (std::string(check.id) == "mpi")
            CHECK(contains(advice, "mpirun -x NCCL_DEBUG=INFO -np <ranks> doctor --mpi"));
        // NCCL's log only where the check calls NCCL; the P2P checks get the P2P path's advice instead.
        const bool p2p = std::string(check.id) == "p2p" || std::string(check.id) == "bandwidth";
        const bool calls_nccl = std::string(check.id) == "nccl" || std::string(check.id) == "mpi";
        CHECK(contains(advice, "NCCL_DEBUG=INFO") == calls_nccl);
        CHECK(contains(advice, "NCCL_P2P_DISABLE=1") == p2p);
    }
    CHECK(contains(rerun_stuck_check_advice("devices"), "one GPU at a time"));
}

TEST_CASE("a disarmed watchdog lets the run go on") {
    Report report(true, "", "single-process");
    Watchdog watchdog(report);
    // Armed long enough that no stall of a loaded machine between the two lines fires it, and the sleep
    // outlasts it, so a disarm that did not hold would end the test binary.
    watchdog.arm("host", 2.0);
    watchdog.disarm();
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    CHECK(report.exit_code() == kExitOk);
}

TEST_CASE("a deadline counts down") {
    const Deadline later(60.0);  // far enough that no stall of a loaded machine passes it
    CHECK(!later.passed());
    CHECK(later.remaining() > 0.0);
    const Deadline soon(0.05);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    CHECK(soon.passed());
}

TEST_CASE("fault injection: known names switch faults on, anything else is a usage error naming the variable") {
    const Injection none = parse_injection("");
    CHECK(!none.corrupt_peer);
    CHECK(!none.hang_nccl);
    const Injection both = parse_injection("corrupt-peer,hang-nccl");
    CHECK(both.corrupt_peer);
    CHECK(both.hang_nccl);
    CHECK(!both.hang_peer_kernel);
    CHECK(parse_injection("hang-peer-kernel").hang_peer_kernel);
    CHECK(parse_injection("fault-peer-kernel").fault_peer_kernel);
    CHECK(!both.fault_peer_kernel);
    CHECK(!both.fail_rank1);
    CHECK(parse_injection("fail-rank1").fail_rank1);
    CHECK(parse_injection("busy-gpu-rank1").busy_gpu_rank1);
    CHECK(!both.busy_gpu_rank1);
    CHECK(parse_injection("nccl-no-memory").nccl_no_memory);
    CHECK(!both.nccl_no_memory);
    try {
        parse_injection("corrupt-peer,melt-gpu");
        FAIL("no error");
    } catch (const UsageError& error) {
        CHECK(contains(error.what(), "FWI_DOCTOR_INJECT"));
        CHECK(contains(error.what(), "melt-gpu"));
    }
    // A stray comma is refused, as in every comma list: "hang-nccl," usually means a name was left out.
    for (const char* text : {",", "hang-nccl,", "corrupt-peer,,hang-nccl"})
        CHECK_THROWS_AS(parse_injection(text), UsageError);
    // A name given twice too, as in a flag's list: the second was probably meant to be another.
    CHECK_THROWS_WITH_AS(parse_injection("corrupt-peer,corrupt-peer"),
                         "FWI_DOCTOR_INJECT: 'corrupt-peer' is listed twice", UsageError);
}

TEST_CASE("the environment: CUDA_*, NCCL_* and OMPI_* variables, sorted; mpirun's own OMPI_* only counted") {
    const Variables variables = relevant_variables({"PATH=/usr/bin", "NCCL_P2P_DISABLE=1", "CUDA_VISIBLE_DEVICES=0,1",
                                                    "OMPI_MCA_orte_hnp_uri=123", "OMPI_MCA_btl=^openib", "HOME=/root"});
    REQUIRE(variables.size() == 4);
    CHECK(variables.front().first == "CUDA_VISIBLE_DEVICES");
    CHECK(value_of(variables, "NCCL_P2P_DISABLE") == "1");
    CHECK(value_of(variables, "HOME").empty());
    CHECK(worth_showing("OMPI_MCA_btl"));
    CHECK(!worth_showing("OMPI_MCA_orte_hnp_uri"));
    const auto lines = environment_lines(variables);
    CHECK(lines.size() == 4);
    CHECK(lines.back() == "(1 more OMPI_* variables of mpirun's own: see --json)");
    CHECK(environment_lines({}).front() == "CUDA_VISIBLE_DEVICES (unset: every GPU)");
    // A value is shown on its line: a newline or an escape sequence in it could forge a line of the report.
    CHECK(environment_lines({{"CUDA_VISIBLE_DEVICES", "a\nFAKE: PASS\x1b[2J"}}).front() ==
          "CUDA_VISIBLE_DEVICES=a\\x0aFAKE: PASS\\x1b[2J");
    CHECK(environment_json(variables).str() ==
          R"({"CUDA_VISIBLE_DEVICES": "0,1", "NCCL_P2P_DISABLE": "1", "OMPI_MCA_btl": "^openib", )"
          R"("OMPI_MCA_orte_hnp_uri": "123"})");
}

TEST_CASE("NCCL settings that take its fast path away are marked; harmless ones are only noted") {
    const auto notes =
        nccl_setting_notes(relevant_variables({"NCCL_P2P_DISABLE=1", "NCCL_NVLS_ENABLE=0", "NCCL_SHM_DISABLE=0"}));
    REQUIRE(notes.size() == 3);
    CHECK(contains(notes[0].text(), "NCCL_P2P_DISABLE=1: "));
    CHECK(notes[0].setting == "NCCL_P2P_DISABLE=1");
    CHECK(notes[0].slows);
    CHECK(!notes[1].slows);  // NCCL_SHM_DISABLE=0 turns nothing off
    CHECK(!notes[2].slows);  // NCCL_NVLS_ENABLE=0 is the suite's setting
    // NCCL_P2P_LEVEL slows NCCL only below its default, PXB: LOC (the old 0) turns P2P off, SYS allows more.
    CHECK(nccl_setting_notes({{"NCCL_P2P_LEVEL", "0"}}).at(0).slows);
    CHECK(nccl_setting_notes({{"NCCL_P2P_LEVEL", "NVL"}}).at(0).slows);
    CHECK(!nccl_setting_notes({{"NCCL_P2P_LEVEL", "SYS"}}).at(0).slows);
    CHECK(!nccl_setting_notes({{"NCCL_P2P_DISABLE", "2"}}).at(0).slows);  // NCCL reads only 1 as "disable"
    // Settings that undo what keeps the suite's NCCL calls within its time limits are named with the reason.
    CHECK(contains(nccl_setting_notes({{"NCCL_RUNTIME_CONNECT", "1"}}).at(0).text(), "without the suite's time limit"));
    CHECK(contains(nccl_setting_notes({{"NCCL_COMM_BLOCKING", "1"}}).at(0).text(), "without its time limit"));
    // The network's settings, a common cause of set-ups across nodes that fail or hang, are named too.
    CHECK(contains(nccl_setting_notes({{"NCCL_SOCKET_IFNAME", "eth9"}}).at(0).text(), "NCCL_SOCKET_IFNAME=eth9: "));
    CHECK(contains(nccl_setting_notes({{"NCCL_IB_HCA", "mlx5_0"}}).at(0).text(), "InfiniBand adapters"));
    CHECK(!nccl_setting_notes({{"NCCL_NET", "Socket"}}).at(0).slows);  // across nodes only: check 5 runs on one
}

TEST_CASE("/dev/shm is a problem when it is missing, small, or nearly full (segments of killed jobs)") {
    constexpr double kGiB = 1024.0 * 1024 * 1024;
    CHECK(shared_memory_problem(0, 0).what == "/dev/shm is missing or small");
    CHECK(contains(shared_memory_problem(64.0 * 1024 * 1024, 64.0 * 1024 * 1024).fix, "--shm-size"));
    CHECK(shared_memory_problem(64 * kGiB, 32 * kGiB).what.empty());
    CHECK(shared_memory_problem(1 * kGiB, 0.5 * kGiB).what.empty());  // a small one in use: a quarter is left
    CHECK(shared_memory_problem(1 * kGiB, 0.2 * kGiB).what == "/dev/shm has 205 MiB free of 1.0 GiB");
    const HostProblem full = shared_memory_problem(64 * kGiB, 0.25 * kGiB);
    CHECK(full.what == "/dev/shm has 256 MiB free of 64.0 GiB");
    CHECK(contains(full.fix, "ls -lt /dev/shm"));
}

TEST_CASE("a locked-memory limit is a problem only where there are InfiniBand devices") {
    CHECK(locked_memory_problem(false, false, "8 MiB").empty());
    CHECK(locked_memory_problem(true, true, "unlimited").empty());
    CHECK(locked_memory_problem(true, false, "8 MiB") ==
          "locked memory is limited to 8 MiB on a host with InfiniBand devices, whose transport locks NCCL's buffers");
}

TEST_CASE(
    "an NCCL_P2P_LEVEL below the default takes P2P away only where a pair's link is beyond it, NCCL_P2P_DISABLE only "
    "where a pair has peer access") {
    const auto two_gpus = [](Link link) {
        GpuSystem system;
        system.count = 2;
        system.can_access = {0, 1, 1, 0};
        system.links = {Link{}, link, link, Link{}};
        return system;
    };
    const GpuSystem nvlink = two_gpus(Link{18, ""}), one_switch = two_gpus(Link{0, "PIX"}),
                    across_cpus = two_gpus(Link{0, "SYS"});
    CHECK(!p2p_level_limits_pairs("NVL", nvlink));
    CHECK(!p2p_level_limits_pairs("PIX", nvlink));
    CHECK(p2p_level_limits_pairs("LOC", nvlink));
    CHECK(p2p_level_limits_pairs("0", nvlink));
    CHECK(p2p_level_limits_pairs("NVL", one_switch));
    CHECK(!p2p_level_limits_pairs("PIX", one_switch));
    CHECK(!p2p_level_limits_pairs("1", one_switch));
    CHECK(p2p_level_limits_pairs("PIX", across_cpus));
    CHECK(!p2p_level_limits_pairs("PXB", across_cpus));  // NCCL's default: nothing taken away by the setting
    CHECK(!p2p_level_limits_pairs("SYS", across_cpus));
    // Without check 2's links it may: assume it does.
    GpuSystem unknown = nvlink;
    unknown.links.clear();
    CHECK(p2p_level_limits_pairs("NVL", unknown));
    // NCCL_P2P_DISABLE=1 takes P2P away only where a pair has it.
    CHECK(some_pair_has_peer_access(across_cpus));
    GpuSystem without_access = across_cpus;
    std::fill(without_access.can_access.begin(), without_access.can_access.end(), 0);
    CHECK_FALSE(some_pair_has_peer_access(without_access));
    unknown.can_access.clear();
    CHECK(some_pair_has_peer_access(unknown));
}

TEST_CASE("the stack limit: under 8 MiB or unlimited is a problem before NCCL 2.28, which sizes its threads itself") {
    const unsigned long long mib = 1024 * 1024;
    CHECK(stack_limit_problem(false, 8 * mib, "2.19.3", "").empty());
    CHECK(contains(stack_limit_problem(false, 4 * mib, "2.27.7", ""),
                   "the stack limit (4 MiB) is below 8 MiB, and NCCL 2.27.7 gives its threads stacks of that size"));
    CHECK(contains(stack_limit_problem(true, 0, "2.27.7", ""),
                   "unlimited, which gives the threads of NCCL 2.27.7 only 2 MiB"));
    CHECK(stack_limit_problem(false, 4 * mib, "2.28.3", "").empty());
    CHECK(stack_limit_problem(true, 0, "2.28.3", "").empty());
    CHECK(stack_limit_problem(true, 0, "3.0.0", "").empty());
    CHECK(stack_limit_problem(false, 4 * mib, "2.28.3", "1").empty());
    // NCCL_SET_CPU_STACK_SIZE=0 turns 2.28's sizing off: glibc's rule is back. NCCL reads an integer, so
    // 00 is 0 too, and text that is not a number leaves the sizing on.
    CHECK(contains(stack_limit_problem(false, 4 * mib, "2.28.3", "0"), "with NCCL_SET_CPU_STACK_SIZE=0"));
    CHECK(contains(stack_limit_problem(true, 0, "2.28.3", "0"), "only 2 MiB"));
    CHECK(contains(stack_limit_problem(false, 4 * mib, "2.28.3", "00"), "with NCCL_SET_CPU_STACK_SIZE=0"));
    CHECK(stack_limit_problem(false, 4 * mib, "2.28.3", "off").empty());
    CHECK(!nccl_stack_sizing_turned_off(""));
    CHECK(!nccl_stack_sizing_turned_off("1"));
    CHECK(!nccl_stack_sizing_turned_off("0 "));
    CHECK(nccl_stack_sizing_turned_off("0x0"));
}

TEST_CASE("check 4 compares a pair's copies with the pairs linked alike, not with every pair") {
    // GPUs 0-1 and 2-3 over NVLink (one of those links degraded), every other pair over PCIe through the
    // CPU (SYS), far slower by design: only the degraded NVLink pair is slow, and no PCIe pair.
    GpuSystem system;
    system.count = 4;
    system.links.resize(16);
    Matrix on(4), off(4);
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) {
            if (i == j) continue;
            const bool nvlink = i / 2 == j / 2;
            system.links[i * 4 + j] = nvlink ? Link{18, ""} : Link{0, "SYS"};
            on.at(i, j) = nvlink ? 380.0 : 20.0;
            off.at(i, j) = 15.0;
        }
    on.at(2, 3) = 120.0;
    const auto problems = bandwidth_problems(system, on, off);
    REQUIRE(problems.size() == 1);
    CHECK(problems[0] == "GPU 2 -> GPU 3 120.0 GB/s, under half the median 380.0 GB/s of the pairs over NVLink");
    // P2P slower than staged through the host.
    off.at(0, 2) = 30.0;
    const auto slower = bandwidth_problems(system, on, off);
    REQUIRE(slower.size() == 2);
    CHECK(slower[0] ==
          "GPU 0 -> GPU 2 is slower with P2P (20.0 GB/s) than staged through the host (30.0 GB/s): usual where the "
          "path goes through the CPU (SYS), which staging through host memory can beat; NCCL leaves P2P over such "
          "paths out on Intel and ARM hosts but uses it on others (AMD), where NCCL_P2P_LEVEL=PXB keeps it to paths "
          "without the CPU");
    // Through a PCIe switch the likely cause is ACS; over NVLink, a link down; unknown, none is named.
    system.links[0 * 4 + 2].pcie = "PXB";
    CHECK(bandwidth_problems(system, on, off)[0].find("ACS on the switch may send it up to the CPU") !=
          std::string::npos);
    system.links[0 * 4 + 2].pcie = "SYS";
    CHECK(why_p2p_is_slower("NVLink").find("a link may be down") != std::string::npos);
    CHECK(why_p2p_is_slower("").empty());
    // Without NVML's links, the pairs CUDA ranks alike are compared: the NVLink pairs (rank 0) with each
    // other, the PCIe ones (rank 1) with each other, so the degraded NVLink pair is seen, and no PCIe pair.
    system.links.clear();
    off.at(0, 2) = 15.0;
    system.performance_rank.assign(16, 0);
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) system.performance_rank[i * 4 + j] = i != j && i / 2 != j / 2;
    CHECK(bandwidth_problems(system, on, off) ==
          std::vector<std::string>{"GPU 2 -> GPU 3 120.0 GB/s, under half the median 380.0 GB/s of the pairs that "
                                   "CUDA gives P2P performance rank 0"});
    // Without either, every pair is compared with every other: with 8 PCIe pairs of 12 the median is theirs,
    // 20 GB/s, and the degraded NVLink pair passes unseen.
    system.performance_rank.clear();
    CHECK(bandwidth_problems(system, on, off).empty());
    on.at(0, 1) = 5.0;
    CHECK(bandwidth_problems(system, on, off).at(0) ==
          "GPU 0 -> GPU 1 5.0 GB/s, under half the median 20.0 GB/s of the pairs measured");
}

TEST_CASE("check 4: P2P within 10% of the staged copy is no problem; a GPU's copies within itself are no pair") {
    // Two GPUs, links unknown (no NVML): every pair is compared with every other. Check 4 also times the
    // copies within one GPU (the diagonal), far faster than any link; they are no pair's typical figure.
    GpuSystem system;
    system.count = 2;
    Matrix on(2), off(2);
    on.at(0, 0) = on.at(1, 1) = 1500.0;
    on.at(0, 1) = on.at(1, 0) = 20.0;
    off.at(0, 1) = 21.0;  // P2P 95% of staged: within the margin
    off.at(1, 0) = 25.0;  // P2P 80% of staged: slower
    CHECK(bandwidth_problems(system, on, off) ==
          std::vector<std::string>{
              "GPU 1 -> GPU 0 is slower with P2P (20.0 GB/s) than staged through the host (25.0 GB/s)"});
}

TEST_CASE("IOMMU options on the kernel command line") {
    const IommuHints translated = parse_iommu_hints("BOOT_IMAGE=/vmlinuz ro intel_iommu=on quiet");
    CHECK(translated.enabled_by_option);
    CHECK(!translated.passthrough);
    CHECK(translated.options == std::vector<std::string>{"intel_iommu=on"});
    const IommuHints passthrough = parse_iommu_hints("amd_iommu=on iommu=pt");
    CHECK(passthrough.passthrough);
    CHECK(parse_iommu_hints("iommu=off").disabled_by_option);
    CHECK(parse_iommu_hints("ro quiet splash").options.empty());
}

TEST_CASE("IOMMU translation: the groups' types where the kernel gives them, else the command line") {
    const IommuHints none = parse_iommu_hints("ro quiet");
    // Passthrough built into the kernel: no option on the command line, every group "identity".
    CHECK(!iommu_translates({"identity", "identity"}, none, 2));
    CHECK(iommu_translates({"identity", "DMA-FQ"}, none, 2));
    CHECK(iommu_translates({"DMA"}, parse_iommu_hints("iommu=pt"), 1));  // the kernel's word wins
    // An older kernel without the type files: the command line decides.
    CHECK(iommu_translates({}, none, 5));
    CHECK(!iommu_translates({}, parse_iommu_hints("intel_iommu=on iommu=pt"), 5));
    CHECK(!iommu_translates({}, parse_iommu_hints("iommu=off"), 0));
    CHECK(!iommu_translates({}, none, 0));
}

namespace {

// A PCI function's configuration space: 4096 bytes (or `size`), with an ACS capability holding `control`
// at `acs_at` (0: none) behind one other extended capability at 0x100.
std::vector<unsigned char> config_space(unsigned control, size_t acs_at = 0x148, size_t size = 4096) {
    std::vector<unsigned char> bytes(size, 0);
    const auto put = [&](size_t offset, unsigned value, int count) {
        for (int i = 0; i < count && offset + i < size; ++i) bytes[offset + i] = (value >> (8 * i)) & 0xff;
    };
    put(0x100, 0x0001u | (1u << 16) | (unsigned(acs_at) << 20), 4);  // AER, then the ACS capability
    if (acs_at != 0) {
        put(acs_at, 0x000du | (1u << 16), 4);  // ACS, the last capability
        put(acs_at + 4, 0x007f, 2);            // what the port could do
        put(acs_at + 6, control, 2);
    }
    return bytes;
}

// A sysfs tree under `root` as Linux lays it out: the functions nested under their bridges in devices/,
// and bus/pci/devices/<address> linking to each.
void add_pci_function(const std::filesystem::path& root, const std::vector<std::string>& path,
                      const std::vector<unsigned char>& config) {
    std::filesystem::path dir = root / "devices" / "pci0000:00";
    for (const auto& function : path) dir /= function;
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "config", std::ios::binary).write(reinterpret_cast<const char*>(config.data()), config.size());
    std::filesystem::create_directories(root / "bus" / "pci" / "devices");
    std::error_code exists;
    std::filesystem::create_directory_symlink(dir, root / "bus" / "pci" / "devices" / path.back(), exists);
}

}  // namespace

TEST_CASE("ACS: the switch ports between two GPUs are those below the deepest function both paths hold") {
    const auto a = pci_functions_on_path("/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:08.0/0000:03:00.0");
    CHECK(a == std::vector<std::string>{"0000:00:01.0", "0000:01:00.0", "0000:02:08.0", "0000:03:00.0"});
    const auto b = pci_functions_on_path("/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:10.0/0000:04:00.0");
    CHECK(switch_ports_between(a, b) == std::vector<std::string>{"0000:02:08.0", "0000:02:10.0"});
    // Under different root ports: no switch between them, whatever lies below each port.
    const auto c = pci_functions_on_path("/sys/devices/pci0000:00/0000:00:02.0/0000:05:00.0/0000:06:00.0/0000:07:00.0");
    CHECK(switch_ports_between(a, c).empty());
    // Two levels of switches: every port below the shared one, on both sides.
    const auto d = pci_functions_on_path(
        "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:10.0/0000:08:00.0/0000:09:04.0/0000:0a:00.0");
    CHECK(switch_ports_between(a, d) ==
          std::vector<std::string>{"0000:02:08.0", "0000:02:10.0", "0000:08:00.0", "0000:09:04.0"});
}

TEST_CASE("ACS: the control register is found among the extended capabilities, and its redirect bits named") {
    CHECK(acs_control(config_space(0x001d)) == 0x001du);  // SV RR CR UF, what Linux sets with the IOMMU on
    CHECK(acs_control(config_space(0x0000)) == 0x0000u);
    CHECK(!acs_control(config_space(0x001d, 0)).has_value());          // no ACS capability
    CHECK(!acs_control(config_space(0x001d, 0x148, 64)).has_value());  // what a reader without root sees
    CHECK(!has_extended_config(config_space(0, 0x148, 64)));
    std::vector<unsigned char> looping = config_space(0, 0);
    looping[0x102] = 0x01, looping[0x103] = 0x10;  // the first capability names itself as the next
    CHECK(!acs_control(looping).has_value());
    // A next pointer below 0x100 leaves the extended capabilities: the walk ends there, even where the bytes
    // it points to look like an ACS capability.
    std::vector<unsigned char> outside = config_space(0, 0);
    outside[0x102] = 0x01, outside[0x103] = 0x04;  // AER, then "next at 0x040"
    outside[0x40] = 0x0d, outside[0x42] = 0x01, outside[0x46] = 0x1d;
    CHECK(!acs_control(outside).has_value());
    CHECK(acs_redirect_bits(0x001d) == "RR CR");
    CHECK(acs_redirect_bits(0x0020) == "EC");
    CHECK(acs_redirect_bits(0x0013).empty());  // source validation, translation blocking, upstream forwarding
}

TEST_CASE("ACS read from a sysfs tree: redirecting ports named once, unreadable ones and missing GPUs counted") {
    const std::filesystem::path root =
        std::filesystem::temp_directory_path() / ("doctor-acs-test-" + std::to_string(::getpid()));
    std::filesystem::remove_all(root);
    const std::vector<std::string> upstream{"0000:00:01.0", "0000:01:00.0"};
    const auto below = [&](std::vector<std::string> rest) {
        std::vector<std::string> path = upstream;
        path.insert(path.end(), rest.begin(), rest.end());
        return path;
    };
    add_pci_function(root, {"0000:00:01.0"}, config_space(0x001d));
    add_pci_function(root, upstream, config_space(0x0000));
    add_pci_function(root, below({"0000:02:08.0"}), config_space(0x001d));
    add_pci_function(root, below({"0000:02:08.0", "0000:03:00.0"}), config_space(0));
    add_pci_function(root, below({"0000:02:10.0"}), config_space(0x0001));  // source validation only
    add_pci_function(root, below({"0000:02:10.0", "0000:04:00.0"}), config_space(0));
    add_pci_function(root, below({"0000:02:18.0"}), config_space(0x001d, 0x148, 64));
    add_pci_function(root, below({"0000:02:18.0", "0000:05:00.0"}), config_space(0));

    const AcsReading reading = read_acs(
        root.string(),
        {{"0000:03:00.0", "0000:04:00.0"}, {"0000:03:00.0", "0000:05:00.0"}, {"0000:03:00.0", "0000:0f:00.0"}});
    CHECK(reading.ports == std::vector<std::string>{"0000:02:08.0", "0000:02:10.0", "0000:02:18.0"});
    CHECK(reading.redirecting == std::vector<std::string>{"0000:02:08.0 (RR CR)"});
    CHECK(reading.unreadable ==
          std::vector<std::string>{"0000:02:18.0 (its first 64 bytes only: the rest needs root)"});
    CHECK(reading.pairs_without_path == 1);
    std::filesystem::remove_all(root);

    const AcsVerdict verdict = acs_verdict(reading, 3);
    CHECK(contains(verdict.line, "3 GPU pair(s) over PCIe; 3 switch port(s) between them"));
    CHECK(contains(verdict.line, "redirecting: 0000:02:08.0 (RR CR)"));
    CHECK(contains(verdict.line, "not readable: 0000:02:18.0 (its first 64 bytes only"));
    CHECK(contains(verdict.line, "1 pair(s) not found"));
    CHECK(contains(verdict.problem, "through the CPU (0000:02:08.0 (RR CR))"));
    CHECK(contains(verdict.fix, "ECAP_ACS+0x6.w=0000"));
    CHECK(contains(verdict.unread, "ACS on 1 PCIe switch port(s) between GPUs (reading them needs root"));
    const AcsVerdict clean = acs_verdict(AcsReading{{"0000:02:08.0", "0000:02:10.0"}, {}, {}, 0}, 1);
    CHECK(contains(clean.line, "none turns peer traffic away"));
    CHECK(clean.problem.empty());
    CHECK(clean.unread.empty());
    CHECK(contains(acs_verdict(AcsReading{}, 1).line, "no PCIe switch port between them"));
    CHECK(contains(acs_verdict(AcsReading{{}, {}, {}, 2}, 2).line, "not read (the GPUs are not in /sys/bus/pci"));
}

TEST_CASE("the IOMMU groups of the GPUs in PCIe pairs: each GPU's once, none where one is not in sysfs") {
    const std::filesystem::path root =
        std::filesystem::temp_directory_path() / ("doctor-iommu-test-" + std::to_string(::getpid()));
    std::filesystem::remove_all(root);
    // Three GPUs in groups 5 and 6 (passthrough), a NIC in group 7 (translating), as with iommu=pt and one
    // device kept in a DMA domain; a fourth GPU in no group.
    const auto add_group = [&](const std::string& function, int group, const std::string& type) {
        add_pci_function(root, {"0000:00:01.0", function}, config_space(0));
        const std::filesystem::path group_dir = root / "kernel" / "iommu_groups" / std::to_string(group);
        std::filesystem::create_directories(group_dir);
        std::ofstream(group_dir / "type") << type << "\n";
        std::filesystem::create_directory_symlink(group_dir,
                                                  root / "bus" / "pci" / "devices" / function / "iommu_group");
    };
    add_group("0000:01:00.0", 5, "identity");
    add_group("0000:02:00.0", 6, "identity");
    add_group("0000:03:00.0", 6, "identity");
    add_group("0000:04:00.0", 7, "DMA-FQ");
    add_pci_function(root, {"0000:00:01.0", "0000:05:00.0"}, config_space(0));
    const std::vector<PciePair> pairs{{"0000:01:00.0", "0000:02:00.0"}, {"0000:01:00.0", "0000:03:00.0"}};
    const std::vector<std::string> types = gpu_iommu_group_types(root.string(), pairs);
    CHECK(types == std::vector<std::string>{"identity", "identity", "identity"});
    // The machine translates for one device, the GPUs' peer traffic does not meet it.
    CHECK(iommu_translates({"identity", "identity", "DMA-FQ"}, parse_iommu_hints("iommu=pt"), 3));
    CHECK_FALSE(iommu_translates(types, parse_iommu_hints("iommu=pt"), 3));
    CHECK(gpu_iommu_group_types(root.string(), {{"0000:01:00.0", "0000:04:00.0"}}) ==
          std::vector<std::string>{"identity", "DMA-FQ"});
    // A GPU without a group (or missing from sysfs): the GPUs' groups cannot judge.
    CHECK(gpu_iommu_group_types(root.string(), {{"0000:01:00.0", "0000:05:00.0"}}).empty());
    CHECK(gpu_iommu_group_types(root.string(), {{"0000:01:00.0", "0000:0f:00.0"}}).empty());
    std::filesystem::remove_all(root);
}

TEST_CASE("check 6 names ACS as not judged where it could not relate it to the pairs, not where there is none") {
    // One GPU (check 2 ran, no pair, no links known): no pair, so ACS cannot matter.
    CHECK_FALSE(contains(check_host(PeerPairs{true, false, {}}).summary, "ACS ("));
    // No GPU visible (check 2 skipped): no pair either.
    CHECK(GpuSystem{}.peer_pairs().checked);
    CHECK_FALSE(contains(check_host(GpuSystem{}.peer_pairs()).summary, "ACS ("));
    // Check 2 did not run (under --mpi): the pairs are unknown.
    CHECK(contains(check_host(PeerPairs{false, false, {}}).summary,
                   "ACS (the GPU pairs are known only when check 2 runs)"));
    // A pair with peer access, but no NVML to tell NVLink from PCIe.
    CHECK(contains(check_host(PeerPairs{true, false, {{"0000:01:00.0", "0000:02:00.0"}}}).summary,
                   "ACS (without NVML, NVLink cannot be told from PCIe)"));
}

TEST_CASE("check 6's GPU pairs: those with peer access over PCIe, and a count of those without any") {
    // GPUs 0-1 over NVLink; 0-2 and 1-2 over PCIe, 0-2 with peer access one way; 0-3, 1-3 and 2-3 with none.
    GpuSystem system;
    system.count = 4;
    system.pci = {
        {0, 1, 0, "0000:01:00.0"}, {0, 2, 0, "0000:02:00.0"}, {0, 3, 0, "0000:C3:00.0"}, {0, 4, 0, "0000:C4:00.0"}};
    system.can_access.assign(16, 0);
    system.links.assign(16, Link{0, "PHB"});
    for (const auto& [i, j] : {std::pair{0, 1}, std::pair{1, 0}, std::pair{2, 0}}) system.can_access[i * 4 + j] = 1;
    system.links[0 * 4 + 1] = system.links[1 * 4 + 0] = Link{18, ""};
    const PeerPairs pairs = system.peer_pairs();
    CHECK(pairs.checked);
    REQUIRE(pairs.pcie.size() == 1);
    CHECK(pairs.pcie[0].first == "0000:01:00.0");
    CHECK(pairs.pcie[0].second == "0000:c3:00.0");  // lower case, as sysfs names it
    CHECK(pairs.without_access == 4);               // 1-2 and the three pairs with GPU 3
}

TEST_CASE("no GPU: the most likely cause comes first, and the facts are all listed") {
    NoGpuFacts facts;
    facts.cuda_error = "cudaErrorInsufficientDriver";
    facts.runtime_version = 13000;
    SUBCASE("no driver at all") {
        const Finding finding = diagnose_no_gpu(facts);
        CHECK(finding.status == Status::fail);
        CHECK(contains(finding.summary, "no NVIDIA driver"));
        CHECK(contains(finding.next, "--gpus all"));
        CHECK(finding.details.size() == 6);
        CHECK(contains(finding.details[1], "not found (libcuda.so.1)"));
        CHECK(contains(finding.details[5], "nvidia-smi: not found on PATH"));
    }
    SUBCASE("CUDA_VISIBLE_DEVICES hides the GPUs the driver sees") {
        facts.cuda_error = "cudaErrorNoDevice";
        facts.driver_version = 13000;
        facts.traces.kernel_module = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.82.07";
        facts.visible_devices_set = true;
        facts.nvml_gpus = 4;
        const Finding finding = diagnose_no_gpu(facts);
        CHECK(contains(finding.summary, "CUDA_VISIBLE_DEVICES='' hides the 4 GPUs the driver sees"));
        // Escaped, as in the environment's lines: a newline would start a line of the report's own.
        facts.visible_devices = "0\n  PASS  all GPUs fine";
        CHECK(contains(diagnose_no_gpu(facts).summary, "CUDA_VISIBLE_DEVICES='0\\x0a  PASS  all GPUs fine' hides"));
    }
    SUBCASE("every GPU in MIG mode without an instance CUDA can use") {
        facts.cuda_error = "cudaErrorNoDevice";
        facts.driver_version = 13000;
        facts.traces.kernel_module = "NVRM version: 580";
        facts.traces.control_node = true;
        facts.nvml_gpus = facts.gpus_in_mig_mode = 2;
        const Finding finding = diagnose_no_gpu(facts);
        CHECK(contains(finding.summary, "every GPU the driver sees is in MIG mode (2), and CUDA sees no instance"));
        CHECK(contains(finding.next, "nvidia-smi -L"));
        facts.gpus_in_mig_mode = 1;  // the other GPU is whole: something else hides it
        CHECK(contains(diagnose_no_gpu(facts).summary, "the driver sees 2 GPU(s) but CUDA sees none"));
        facts.gpus_in_mig_mode = 2;  // CUDA's own error names its cause, whatever the GPUs' mode
        facts.cuda_error = "cudaErrorInsufficientDriver";
        facts.driver_version = 12040;
        CHECK(contains(diagnose_no_gpu(facts).summary, "older than this build's runtime"));
    }
    SUBCASE("a driver older than the runtime") {
        facts.driver_version = 12040;
        facts.traces.kernel_module = "NVRM version: 550";
        CHECK(contains(diagnose_no_gpu(facts).summary,
                       "supports CUDA 12.4, older than this build's runtime (CUDA 13.0)"));
    }
    SUBCASE("WSL2: no /dev/nvidia* and no kernel module there, which is no fault; the Windows driver is") {
        facts.traces.wsl_gpu = true;
        const Finding no_libcuda = diagnose_no_gpu(facts);
        CHECK(contains(no_libcuda.summary, "WSL2 (/dev/dxg) without libcuda.so.1"));
        CHECK(contains(no_libcuda.next, "NVIDIA driver on Windows"));
        CHECK_FALSE(contains(no_libcuda.next, "--gpus all"));
        CHECK(contains(no_libcuda.details[3], "/dev/dxg present (WSL2)"));
        facts.cuda_error = "cudaErrorNoDevice";
        facts.driver_version = 13000;
        const Finding none_seen = diagnose_no_gpu(facts);
        CHECK(contains(none_seen.summary, "WSL2 (/dev/dxg), and CUDA sees no GPU through it"));
        CHECK_FALSE(contains(none_seen.summary, "/dev/nvidia* device nodes"));
    }
    SUBCASE("NVSwitch machine without the fabric manager") {
        facts.cuda_error = "cudaErrorSystemNotReady";
        facts.driver_version = 13000;
        facts.traces.kernel_module = "NVRM version: 580";
        CHECK(contains(diagnose_no_gpu(facts).next, "nvidia-fabricmanager"));
    }
}

TEST_CASE("the build's code: none for a GPU fails, older PTX on a 9.0 GPU warns, machine code or newer PTX passes") {
    const BuildCode sm90{true, 90, 90, ""}, sm80{true, 80, 80, ""}, ptx80_on_90{true, 80, 90, ""},
        ptx90_on_100{true, 90, 100, ""}, none{false, 0, 0, "cudaErrorNoKernelImageForDevice"};
    const std::string architectures = "80-real,90-real,90-virtual";
    CHECK(build_code_verdict({{0, 90, sm90}, {1, 90, sm90}}, architectures).status == Status::pass);
    CHECK(build_code_verdict({{0, 86, sm80}}, architectures).status == Status::pass);
    CHECK(build_code_verdict({{0, 100, ptx90_on_100}}, architectures).status == Status::pass);
    const Finding older = build_code_verdict({{0, 90, sm90}, {1, 90, ptx80_on_90}}, "80");
    CHECK(older.status == Status::warn);
    CHECK(contains(older.summary, "GPU 1 (sm_90) runs compute_80 PTX"));
    CHECK(contains(older.summary, "without programmatic launch"));
    CHECK(contains(older.next, "--fresh"));
    const Finding failed = build_code_verdict({{0, 90, none}, {1, 90, ptx80_on_90}}, "80-real");
    CHECK(failed.status == Status::fail);
    CHECK(contains(failed.summary,
                   "(CUDA architectures 80-real) has no code these GPUs can run (GPU 0 (sm_90): "
                   "cudaErrorNoKernelImageForDevice)"));
    CHECK(contains(failed.next, "--fresh"));
}

TEST_CASE("a GPU's code: machine code, older PTX, or its own architecture's PTX compiled when a program loads") {
    const BuildCode sm90{true, 90, 90, ""}, ptx80_on_90{true, 80, 90, ""};
    CHECK(code_text(sm90, "80-real,90-real,90-virtual") == "runs sm_90 code");
    CHECK(code_text(sm90, "90") == "runs sm_90 code");
    CHECK(code_text(sm90, "90a-real") == "runs sm_90 code");
    CHECK(code_text(sm90, "native") == "runs sm_90 code");
    // A PTX-only build: the driver compiled compute_90 for sm_90, which cudaFuncGetAttributes reports as 90 and 90.
    CHECK(code_text(sm90, "90-virtual") == "runs compute_90 PTX, compiled for sm_90 when a program loads");
    CHECK(code_text(sm90, "80-real,90-virtual") == "runs compute_90 PTX, compiled for sm_90 when a program loads");
    CHECK(code_text(sm90, "100-real,90-virtual") == "runs compute_90 PTX, compiled for sm_90 when a program loads");
    CHECK(code_text(ptx80_on_90, "80") == "runs compute_80 PTX compiled for sm_90");
    CHECK(!builds_machine_code_for("", 90));
    CHECK(!builds_machine_code_for("900-real", 90));
}

TEST_CASE("clocks lowered by the hardware or for heat warn, naming the GPU; idle and the power cap do not") {
    CHECK(clock_slowdown_verdict({}).status == Status::pass);
    CHECK(clock_slowdown_verdict({{0, 0x1}, {1, 0x4}, {2, 0x0}}).status == Status::pass);  // idle, power cap
    const Finding slowed = clock_slowdown_verdict({{0, 0x1}, {3, 0x40 | 0x8}, {5, 0x20}});
    CHECK(slowed.status == Status::warn);
    CHECK(contains(
        slowed.summary,
        "clocks lowered by GPU 3: hardware slowdown, hardware thermal slowdown; GPU 5: driver's thermal slowdown"));
    CHECK(contains(slowed.next, "nvidia-smi -q -d PERFORMANCE"));
    CHECK(contains(clock_slowdown_verdict({{1, 0x80}}).summary, "GPU 1: power brake"));
}

TEST_CASE("a power limit set below 90% of the default warns, naming the GPU; an unknown one is not judged") {
    CHECK(power_limit_verdict({}).status == Status::pass);
    CHECK(
        power_limit_verdict({{0, {700.0, 700.0}}, {1, {640.0, 700.0}}, {2, {0.0, 700.0}}, {3, {300.0, 0.0}}}).status ==
        Status::pass);
    const Finding capped = power_limit_verdict({{0, {700.0, 700.0}}, {1, {350.0, 700.0}}});
    CHECK(capped.status == Status::warn);
    CHECK(contains(capped.summary, "power limit lowered: GPU 1 to 350 W of its default 700 W"));
    CHECK(contains(capped.next, "nvidia-smi -q -d POWER"));
}

TEST_CASE("the bandwidth cross-check starts a pair only where its copies take at most half the time left") {
    const double copies = 11 * 256.0 * (1 << 20);                 // 2.95 GB
    CHECK(cross_check_fits(copies, 300.0, 30.0));                 // NVLink: 0.01 s
    CHECK_FALSE(cross_check_fits(copies, 3.0, 1.5));              // ACS-slowed P2P: 1 s of the 1.5 s left
    CHECK(cross_check_fits(copies, 3.0, 2.0));                    // ... and of 2 s
    CHECK_FALSE(cross_check_fits(copies, kNotMeasured, 1000.0));  // no rate: not started
    CHECK_FALSE(cross_check_fits(copies, 0.0, 1000.0));
}

TEST_CASE("GPUs in MIG mode that the process sees warn, naming them; others are named and not judged") {
    const PciAddress gpu_41{0, 0x41, 0, "0000:41:00.0"}, gpu_c1{0, 0xc1, 0, "0000:C1:00.0"};  // CUDA's upper case
    CHECK(mig_mode_verdict({}, {gpu_41}).status == Status::pass);
    const Finding one = mig_mode_verdict({"0000:41:00.0"}, {gpu_41});
    CHECK(one.status == Status::warn);
    CHECK(contains(one.summary, "the GPU at 0000:41:00.0 is in MIG mode"));
    CHECK(contains(one.next, "nvidia-smi -i <GPU> -mig 0"));
    CHECK(one.details.empty());
    CHECK(contains(mig_mode_verdict({"0000:41:00.0", "0000:c1:00.0"}, {gpu_41, gpu_c1}).summary,
                   "the GPUs at 0000:41:00.0, 0000:c1:00.0 are in MIG mode"));
    // Another user's GPUs in MIG mode on a shared node, hidden by CUDA_VISIBLE_DEVICES: a line, no WARN.
    const Finding elsewhere = mig_mode_verdict({"0000:c1:00.0", "0000:e1:00.0"}, {gpu_41});
    CHECK(elsewhere.status == Status::pass);
    CHECK(elsewhere.details ==
          std::vector<std::string>{
              "in MIG mode, and not among the GPUs this process sees (not judged): 0000:c1:00.0, 0000:e1:00.0"});
    const Finding both = mig_mode_verdict({"0000:c1:00.0", "0000:e1:00.0"}, {gpu_c1});
    CHECK(both.status == Status::warn);
    CHECK(contains(both.summary, "the GPU at 0000:c1:00.0 is in MIG mode"));
    CHECK(both.details.size() == 1);
}

TEST_CASE(
    "a GPU with fewer NVLinks up than another of its model warns; none up only where its model reaches a switch") {
    const std::string h200 = "NVIDIA H200", l40 = "NVIDIA L40S";
    const std::vector<bool> no_switch(4, false), switched(4, true);
    CHECK(nvlink_count_verdict({h200, h200, h200, h200}, {18, 18, 18, 18}, switched).status == Status::pass);
    CHECK(nvlink_count_verdict({h200, l40}, {18, 0}, {true, false}).status == Status::pass);  // another model
    CHECK(nvlink_count_verdict({h200, h200}, {18, -1}, switched).status == Status::pass);     // unknown
    CHECK(nvlink_count_verdict({l40, l40}, {0, 0}, no_switch).status == Status::pass);
    const std::string a6000 = "NVIDIA RTX A6000";
    CHECK(nvlink_count_verdict({a6000, a6000, a6000}, {4, 4, 0}, no_switch).status == Status::pass);  // bridged
    const Finding bridge_down = nvlink_count_verdict({a6000, a6000}, {4, 2}, no_switch);
    CHECK(bridge_down.status == Status::warn);
    CHECK(contains(bridge_down.summary, "(GPU 1 2 of 4)"));
    // On an NVSwitch board every GPU is linked: none up is a link problem too.
    const Finding down = nvlink_count_verdict({h200, h200, h200, h200}, {18, 16, 18, 0}, {true, true, true, false});
    CHECK(down.status == Status::warn);
    CHECK(contains(down.summary, "(GPU 1 16 of 18, GPU 3 0 of 18)"));
    CHECK(contains(down.next, "nvidia-smi nvlink -s"));
}

TEST_CASE("the log capture sets the subsystems it reads, over a user's NCCL_DEBUG_SUBSYS or NCCL's files") {
    unset_environment_variable("NCCL_DEBUG");  // the capture is doctor's only where the user set neither
    unset_environment_variable("NCCL_DEBUG_FILE");
    const auto subsystems = [] {
        const char* value = std::getenv("NCCL_DEBUG_SUBSYS");
        return std::string(value ? value : "(unset)");
    };
    SUBCASE("a user's setting, which would filter out the INIT lines that name the connections") {
        set_environment_variable("NCCL_DEBUG_SUBSYS", "COLL");
        {
            const NcclLogCapture capture;
            REQUIRE(capture.capturing());
            CHECK(subsystems() == "INIT,ENV");
            CHECK(std::string(std::getenv("NCCL_DEBUG")) == "INFO");
        }
        CHECK(subsystems() == "COLL");
    }
    SUBCASE("none in the environment: set all the same, since NCCL's files (/etc/nccl.conf) could hold one") {
        unset_environment_variable("NCCL_DEBUG_SUBSYS");
        {
            const NcclLogCapture capture;
            REQUIRE(capture.capturing());
            CHECK(subsystems() == "INIT,ENV");
        }
        CHECK(subsystems() == "(unset)");
    }
    CHECK(std::getenv("NCCL_DEBUG") == nullptr);
    unset_environment_variable("NCCL_DEBUG_SUBSYS");
}

TEST_CASE("the log capture leaves a user's NCCL_DEBUG alone, but takes an empty one for none") {
    unset_environment_variable("NCCL_DEBUG_FILE");
    set_environment_variable("NCCL_DEBUG", "WARN");
    CHECK_FALSE(NcclLogCapture().capturing());
    set_environment_variable("NCCL_DEBUG", "");  // `export NCCL_DEBUG=`: no setting, as prepare_nccl reads it
    {
        const NcclLogCapture capture;
        CHECK(capture.capturing());
        CHECK(std::string(std::getenv("NCCL_DEBUG")) == "INFO");
    }
    unset_environment_variable("NCCL_DEBUG");
    unset_environment_variable("NCCL_DEBUG_SUBSYS");
}

// In a child process: makes a capture, writes a line to its log as NCCL would, sends the log's path to the
// parent and calls `end`, which may end the process; else the capture ends and the child exits with 99. The
// parent gets how the child ended and whether the log's folder is still there.
struct CaptureEnd {
    int status = 0;
    bool folder_left = true;
};
CaptureEnd end_while_capturing(const std::function<void()>& end) {
    int channel[2];
    REQUIRE(::pipe(channel) == 0);
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        ::close(channel[0]);
        for (const int signal_number : {SIGINT, SIGTERM, SIGHUP})  // doctest's handlers, as doctor has none
            ::signal(signal_number, SIG_DFL);
        {
            const NcclLogCapture capture;
            const char* log = std::getenv("NCCL_DEBUG_FILE");
            if (!capture.capturing() || !log) ::_exit(98);
            std::ofstream(log) << "host:1:1 [0] NCCL INFO Bootstrap\n";
            if (::write(channel[1], log, std::strlen(log)) < 0) ::_exit(97);
            ::close(channel[1]);
            end();
        }
        ::_exit(99);  // `end` returned, and the capture's destructor ran
    }
    ::close(channel[1]);
    char log[PATH_MAX + 1] = {};
    const ssize_t length = ::read(channel[0], log, PATH_MAX);
    ::close(channel[0]);
    CaptureEnd ended;
    REQUIRE(::waitpid(child, &ended.status, 0) == child);
    REQUIRE(length > 0);
    ended.folder_left = std::filesystem::exists(std::filesystem::path(log).parent_path());
    return ended;
}

TEST_CASE("the log capture's folder is removed when the process ends without the capture's destructor") {
    unset_environment_variable("NCCL_DEBUG");
    unset_environment_variable("NCCL_DEBUG_FILE");
    SUBCASE("a signal that ends it (Ctrl-C, mpirun's SIGTERM): it still ends by that signal") {
        const CaptureEnd ended = end_while_capturing([] { ::raise(SIGTERM); });
        CHECK(WIFSIGNALED(ended.status));
        CHECK(WTERMSIG(ended.status) == SIGTERM);
        CHECK_FALSE(ended.folder_left);
    }
    SUBCASE("end_process_now (a hung check abandoned, a wait past its limit)") {
        const CaptureEnd ended = end_while_capturing([] { end_process_now(kExitEnvironment); });
        CHECK(WIFEXITED(ended.status));
        CHECK(WEXITSTATUS(ended.status) == kExitEnvironment);
        CHECK_FALSE(ended.folder_left);
    }
    SUBCASE("a normal end: the destructor") {
        const CaptureEnd ended = end_while_capturing([] {});
        CHECK(WEXITSTATUS(ended.status) == 99);
        CHECK_FALSE(ended.folder_left);
    }
}

TEST_CASE("the log capture stays out of a TMPDIR with a %, which NCCL would expand in NCCL_DEBUG_FILE") {
    unset_environment_variable("NCCL_DEBUG");
    unset_environment_variable("NCCL_DEBUG_FILE");
    const std::string odd = std::filesystem::temp_directory_path() / ("doctor%p-test." + std::to_string(::getpid()));
    std::filesystem::create_directory(odd);
    const char* tmpdir = std::getenv("TMPDIR");
    const std::optional<std::string> user_tmpdir = tmpdir ? std::optional<std::string>(tmpdir) : std::nullopt;
    set_environment_variable("TMPDIR", odd.c_str());
    {
        const NcclLogCapture capture;
        REQUIRE(capture.capturing());
        CHECK(std::string(std::getenv("NCCL_DEBUG_FILE")).find('%') == std::string::npos);
    }
    if (user_tmpdir)
        set_environment_variable("TMPDIR", user_tmpdir->c_str());
    else
        unset_environment_variable("TMPDIR");
    std::filesystem::remove(odd);
}

TEST_CASE("check 7 names how ranks on different hosts connect, and warns where InfiniBand goes unused") {
    std::vector<RankRecord> records(4);
    for (size_t r = 0; r < records.size(); ++r)
        std::snprintf(records[r].host, sizeof records[r].host, "%s", r < 2 ? "node-a" : "node-b");
    // Each rank's log, packed and merged as check 7 gathers them.
    const auto gathered = [](const std::vector<std::string>& logs) {
        std::vector<RankOutcome> outcomes(logs.size());
        for (size_t r = 0; r < logs.size(); ++r) {
            std::istringstream text(logs[r]);
            set_connections(outcomes[r], parse_nccl_log(text));
        }
        return merged_connections(outcomes);
    };
    const std::string same_host = "h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read\n";
    const std::string socket = "h:1:1 [1] NCCL INFO Channel 00/0 : 1[1] -> 2[0] [send] via NET/Socket/0\n";
    const std::string infiniband = "h:1:1 [3] NCCL INFO Channel 00/0 : 3[1] -> 0[0] [send] via NET/IB/0/GDRDMA\n";
    const NcclLog merged = gathered({same_host, socket, "", infiniband});
    CHECK(merged.transports.size() == 3);
    CHECK(merged.transports.at({1, 2}).count("NET/Socket") == 1);  // without the NIC's number
    // A pair connected through several NICs is one line: as many pairs fit as ranks are likely to have.
    RankOutcome nics;
    std::istringstream two_nics(
        "h:1:1 [3] NCCL INFO Channel 00/0 : 3[1] -> 0[0] [send] via NET/IB/0/GDRDMA\n"
        "h:1:1 [3] NCCL INFO Channel 01/0 : 3[1] -> 0[0] [send] via NET/IB/1/GDRDMA\n");
    set_connections(nics, parse_nccl_log(two_nics));
    CHECK(std::string(nics.connections) == "3 0 NET/IB/GDRDMA\n");  // GPUDirect RDMA or not: still said
    // Sockets across hosts without InfiniBand on them: said, not a problem.
    const Finding plain = network_verdict(records, merged);
    CHECK(plain.status == Status::pass);
    CHECK(contains(join(plain.details, "|"),
                   "across hosts over TCP sockets (NET/Socket, NCCL's slowest transport): "
                   "node-a - node-b"));
    CHECK(contains(join(plain.details, "|"), "across hosts over InfiniBand (NET/IB): node-a - node-b"));
    // ... with InfiniBand devices on one host only: said, not a problem (sockets are all NCCL can use).
    records[2].infiniband_devices = 1;
    const Finding one_sided = network_verdict(records, merged);
    CHECK(one_sided.status == Status::pass);
    CHECK(contains(join(one_sided.details, "|"), "no InfiniBand device seen on node-a (its pair node-b has some)"));
    // ... with InfiniBand devices on both hosts: NCCL left them out.
    records[1].infiniband_devices = 1;
    const Finding unused = network_verdict(records, merged);
    CHECK(unused.status == Status::warn);
    CHECK(unused.summary == "hosts that both have InfiniBand devices connect over TCP sockets: node-a - node-b");
    CHECK(contains(unused.next, "NCCL_IB_DISABLE"));
    CHECK(contains(unused.next, "NCCL_NET_PLUGIN"));
    // One host: sockets between its ranks (P2P and SHM turned off) are not judged here.
    for (RankRecord& record : records) std::snprintf(record.host, sizeof record.host, "%s", "node-a");
    CHECK(network_verdict(records, merged).status == Status::pass);
    CHECK(network_verdict(records, merged).details.empty());
    // More connections than fit: whole lines only.
    NcclLog crowded;
    for (int peer = 0; peer < 400; ++peer) crowded.transports[{0, peer}].insert("NET/IB/0/GDRDMA");
    RankOutcome packed;
    set_connections(packed, crowded);
    const std::string text = packed.connections;
    CHECK(!text.empty());
    CHECK(text.back() == '\n');
    CHECK(packed.connections_left_out == 400 - int(std::count(text.begin(), text.end(), '\n')));
}

TEST_CASE("check 7 warns where NCCL goes around the peer access between the GPUs of ranks on one host") {
    // Ranks 0-2 on node-a (GPUs at 01, 02, 03), ranks 3 and 4 on node-b (01, 02); every GPU of a host has peer
    // access with the others but the one at 03.
    std::vector<RankRecord> records(5);
    const char* bus_ids[] = {"01", "02", "03", "01", "02"};
    for (size_t r = 0; r < records.size(); ++r) {
        std::snprintf(records[r].host, sizeof records[r].host, "%s", r < 3 ? "node-a" : "node-b");
        std::snprintf(records[r].bus_id, sizeof records[r].bus_id, "%s", bus_ids[r]);
    }
    const auto peers = [](const std::string& a, const std::string& b) { return a != "03" && b != "03"; };
    std::vector<RankOutcome> outcomes(records.size());
    for (int r = 0; r < int(records.size()); ++r) set_peer_ranks(outcomes[r], records, r, peers);
    CHECK(std::string(outcomes[0].peer_ranks) == "1");  // not rank 2 (GPU 03), not ranks 3 and 4 (another host)
    CHECK(std::string(outcomes[1].peer_ranks) == "0");
    CHECK(std::string(outcomes[2].peer_ranks).empty());
    CHECK(outcomes[2].peers_known == 1);
    CHECK(std::string(outcomes[3].peer_ranks) == "4");

    // Every pair of a host through host memory. On node-a NCCL_P2P_DISABLE comes from a config file, as rank 1's
    // log reports it (only the settings that take peer links away travel); on node-b from its ranks' environment.
    const auto log_of = [](const std::string& text) {
        std::istringstream stream(text);
        return parse_nccl_log(stream);
    };
    set_connections(outcomes[0], log_of("h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via SHM/direct/direct\n"
                                        "h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 2[2] via SHM/direct/direct\n"));
    set_connections(outcomes[1], log_of("h:1:1 [1] NCCL INFO NCCL_P2P_DISABLE set by environment to 1\n"
                                        "h:1:1 [1] NCCL INFO NCCL_DEBUG_FILE set by environment to /tmp/x\n"
                                        "h:1:1 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via SHM/direct/direct\n"));
    set_connections(outcomes[3], log_of("h:1:1 [0] NCCL INFO Channel 00/0 : 3[0] -> 4[1] via SHM/direct/direct\n"));
    CHECK(std::string(outcomes[1].nccl_log_settings) == "NCCL_P2P_DISABLE=1\n");
    for (int r : {3, 4}) set_nccl_settings(records[r], {"NCCL_P2P_DISABLE=1", "NCCL_SOCKET_IFNAME=ib0"});
    const PeerLinkFindings disabled = peer_link_verdict(records, outcomes, merged_connections(outcomes));
    REQUIRE(disabled.problems.size() == 2);
    CHECK(disabled.problems[0] ==
          "NCCL uses SHM between rank 0 and rank 1, whose GPUs have peer access: NCCL_P2P_DISABLE=1 is set in an "
          "NCCL config file (NCCL_CONF_FILE, ~/.nccl.conf or /etc/nccl.conf)");
    CHECK(disabled.problems[1] ==
          "NCCL uses SHM between rank 3 and rank 4, whose GPUs have peer access: NCCL_P2P_DISABLE=1 is set");
    CHECK(disabled.notes.empty());  // SHM between ranks 0 and 2 is not judged: GPU 03 has no peer access

    // Without a setting on node-a, SHM there is NCCL's own choice: a note, not blamed on node-b's setting.
    outcomes[1].nccl_log_settings[0] = '\0';
    const PeerLinkFindings own_choice = peer_link_verdict(records, outcomes, merged_connections(outcomes));
    REQUIRE(own_choice.problems.size() == 1);
    CHECK(contains(own_choice.problems[0], "between rank 3 and rank 4"));
    REQUIRE(own_choice.notes.size() == 1);
    CHECK(contains(own_choice.notes[0],
                   "NCCL uses SHM between rank 0 and rank 1, whose GPUs have peer access: "
                   "no NCCL setting explains it"));

    // Where NVML cannot say on one rank of the pair, the pair is not judged, and the rank says why.
    set_peer_ranks(outcomes[1], records, 1, [](const std::string&, const std::string&) -> bool {
        throw std::runtime_error("this driver's NVML lacks nvmlDeviceGetP2PStatus");
    });
    CHECK(outcomes[1].peers_known == 0);
    CHECK(std::string(outcomes[1].peers_unknown) == "this driver's NVML lacks nvmlDeviceGetP2PStatus");
    const PeerLinkFindings unknown = peer_link_verdict(records, outcomes, merged_connections(outcomes));
    CHECK(unknown.problems.size() == 1);  // node-b's pair only
    CHECK(unknown.notes.empty());

    // The network between ranks of one host whose GPUs have no peer access (rank 2's GPU 03): shared memory
    // was their path, and NCCL_SHM_DISABLE took it away. Across hosts (rank 2 to rank 3) NET is expected.
    std::vector<RankOutcome> no_shm(records.size());
    for (int r = 0; r < int(records.size()); ++r) set_peer_ranks(no_shm[r], records, r, peers);
    set_connections(no_shm[0], log_of("h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read\n"
                                      "h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 2[2] via NET/Socket/0\n"));
    set_connections(no_shm[2], log_of("h:1:1 [2] NCCL INFO NCCL_SHM_DISABLE set by environment to 1\n"
                                      "h:1:1 [2] NCCL INFO Channel 00/0 : 2[2] -> 3[0] via NET/Socket/0\n"));
    const PeerLinkFindings network = peer_link_verdict(records, no_shm, merged_connections(no_shm));
    REQUIRE(network.problems.size() == 1);
    CHECK(network.problems[0] ==
          "NCCL uses NET between rank 0 and rank 2, whose GPUs have no peer access, on one host: NCCL_SHM_DISABLE=1 "
          "is set in an NCCL config file (NCCL_CONF_FILE, ~/.nccl.conf or /etc/nccl.conf)");
    CHECK(network.advice() == kSharedMemoryUnusedAdvice);
    CHECK(disabled.advice() == kPeerLinksUnusedAdvice);
}

TEST_CASE("check 7 reports check 6 of the hosts other than rank 0's") {
    // Ranks 0 and 1 on node-a, 2 and 3 on node-b, 4 on node-c: the first rank of node-b and node-c ran check 6.
    std::vector<RankRecord> records(5);
    const char* hosts[] = {"node-a", "node-a", "node-b", "node-b", "node-c"};
    for (size_t r = 0; r < records.size(); ++r) std::snprintf(records[r].host, sizeof records[r].host, "%s", hosts[r]);
    records[2].host_check = records[4].host_check = int(Status::pass);
    const Finding fine = other_hosts_verdict(records);
    CHECK(fine.status == Status::pass);
    REQUIRE(fine.details.size() == 1);
    CHECK(fine.details[0] ==
          "check 6 (shared memory, limits) on the other hosts: PASS on node-b (rank 2), node-c (rank 4)");

    // A container's 64 MiB /dev/shm on node-b: check 7 WARNs with node-b's summary and advice.
    records[2].host_check = int(Status::warn);
    std::snprintf(records[2].host_check_summary, sizeof records[2].host_check_summary, "%s",
                  "/dev/shm holds only 64.0 MiB");
    std::snprintf(records[2].host_check_next, sizeof records[2].host_check_next, "%s", "docker run --shm-size=1g");
    const Finding small_shm = other_hosts_verdict(records);
    CHECK(small_shm.status == Status::warn);
    CHECK(small_shm.summary == "check 6 on host node-b: /dev/shm holds only 64.0 MiB");
    CHECK(small_shm.next == "on host node-b: docker run --shm-size=1g");
    CHECK(small_shm.details[0] ==
          "check 6 on node-b (rank 2): WARN  /dev/shm holds only 64.0 MiB; try: docker run --shm-size=1g");
    CHECK(small_shm.details[1] == "check 6 (shared memory, limits) on the other hosts: PASS on node-c (rank 4)");
    // Two such hosts: the first in the summary, both below.
    records[4] = records[2];
    std::snprintf(records[4].host, sizeof records[4].host, "%s", "node-c");
    const Finding two = other_hosts_verdict(records);
    CHECK(two.summary == "check 6 on host node-b: /dev/shm holds only 64.0 MiB (and 1 more host below)");
    CHECK(two.details.size() == 2);

    // A WARN without advice gives none.
    records[2].host_check_next[0] = records[4].host_check_next[0] = '\0';
    CHECK(other_hosts_verdict(records).next.empty());

    // One host: nothing to add (rank 0's check 6 is check 6 itself).
    const std::vector<RankRecord> one_host(2);
    CHECK(other_hosts_verdict(one_host).status == Status::pass);
    CHECK(other_hosts_verdict(one_host).details.empty());
}

TEST_CASE("a GPU that is visible but cannot be opened is named, with CUDA's error") {
    // Its bus id and compute mode come from the driver: "?" and no mode on a machine without a GPU.
    const std::string message = gpu_not_opened(0, cudaErrorDevicesUnavailable).what();
    CHECK(message.rfind("GPU 0 (PCI ", 0) == 0);
    CHECK(contains(message, ") is visible but cannot be opened (cudaErrorDevicesUnavailable): "));
    CHECK_FALSE(contains(message, "to check the other GPUs"));  // the only GPU
    CHECK(contains(gpu_not_opened(0, cudaErrorDevicesUnavailable, "", 2).what(),
                   "; to check the other GPUs meanwhile, name only them in CUDA_VISIBLE_DEVICES"));
}

TEST_CASE("a driver older than the build's runtime warns, and says when programmatic launch is lost") {
    const BuildCode sm90{true, 90, 90, ""}, sm80{true, 80, 80, ""};
    CHECK(driver_verdict(13000, 13000, {{0, 90, sm90}}).status == Status::pass);
    CHECK(driver_verdict(13010, 12040, {{0, 90, sm90}}).status == Status::pass);
    CHECK(driver_verdict(0, 12040, {}).status == Status::pass);  // no driver: check 1 says so on its own
    // An older toolkit is advised only down to the suite's floor (12.4), which any CUDA 12 driver runs.
    CHECK(contains(older_driver_advice(12060, 13000), "or build with a CUDA toolkit no newer than 12.6"));
    CHECK(contains(older_driver_advice(12020, 13000), "or build with a CUDA 12 toolkit (12.4 or newer)"));
    CHECK_FALSE(contains(older_driver_advice(12020, 13000), "no newer than 12.2"));
    CHECK_FALSE(contains(older_driver_advice(11080, 12040), "or build"));
    const Finding newer_calls = driver_verdict(12040, 12080, {{0, 90, sm90}});
    CHECK(newer_calls.status == Status::warn);
    CHECK(contains(newer_calls.summary, "the driver supports CUDA 12.4, older than the runtime of this build (12.8)"));
    CHECK_FALSE(contains(newer_calls.summary, "programmatic"));
    CHECK(contains(newer_calls.next, "update the NVIDIA driver"));
    CHECK(contains(driver_verdict(12020, 12040, {{0, 90, sm90}}).summary, "without programmatic launch"));
    CHECK_FALSE(contains(driver_verdict(12020, 12040, {{0, 80, sm80}}).summary, "programmatic"));
}

TEST_CASE("other processes on the GPUs warn, counted once each, with a line each; none is a pass") {
    CHECK(other_processes_verdict(OtherProcesses{}).status == Status::pass);
    CHECK(other_processes_verdict(OtherProcesses{}).details.empty());
    OtherProcesses shared;
    shared.named = {{0, 4242, 20LL << 30, "python3"}, {1, 4242, 1LL << 30, "python3"}, {1, 77, -1, ""}};
    const Finding verdict = other_processes_verdict(shared);
    CHECK(verdict.status == Status::warn);
    CHECK(verdict.summary == "2 other processes on 2 of the GPUs, sharing them");
    REQUIRE(verdict.details.size() == 3);
    CHECK(verdict.details[2] == "GPU 1: pid 77 (not visible from here)");
    CHECK(contains(verdict.next, "CUDA_VISIBLE_DEVICES"));
    OtherProcesses one;
    one.unnamed = {{3, 1}};
    CHECK(other_processes_verdict(one).summary == "1 other process on 1 of the GPUs, sharing them");
    // The JSON that run_doctor_test.sh's --needs-idle-gpus reads ("named": [{ or "unnamed": [{).
    CHECK(other_processes_json(one).str() ==
          R"({"named": [], "unnamed": [{"gpu": 3, "processes": 1}], "hidden_on_gpus": [], "unknown": null})");
    CHECK(contains(other_processes_json(shared).str(),
                   R"("named": [{"gpu": 0, "pid": 4242, "process": "python3", "used_bytes": 21474836480}, )"));
    // A list NVML could not give is a line, not a warning.
    OtherProcesses unknown;
    unknown.unknown = "GPU 0: not listed (NVML not available)";
    const Finding unsure = other_processes_verdict(unknown);
    CHECK(unsure.status == Status::pass);
    CHECK(unsure.details == std::vector<std::string>{"other processes: GPU 0: not listed (NVML not available)"});
}

TEST_CASE(
    "a PCIe link with fewer lanes than it can have warns, or a lower generation under load; at rest or unknown not") {
    CHECK(pcie_link_verdict({}, {}).status == Status::pass);
    const PcieLink full{16, 16, 5, 5}, idle{16, 16, 1, 5}, unknown{};
    // A copy from the host that read the link's generation while it ran, with no rate to judge.
    const auto loaded = [](int generation) { return HostCopy{0.0, generation}; };
    CHECK(pcie_link_verdict({full, idle, unknown}, {loaded(5), {}, {}}).status == Status::pass);
    const Finding verdict = pcie_link_verdict({full, {8, 16, 4, 5}, unknown, {4, 16, 5, 5}}, {});
    CHECK(verdict.status == Status::warn);
    CHECK(verdict.summary ==
          "PCIe links with fewer lanes than they can have (GPU 1 x8 of x16, GPU 3 x4 of x16): copies to and from the "
          "host, and between GPUs without NVLink, are as much slower");
    CHECK(contains(verdict.next, "nvidia-smi -q -d PCIE"));
    // Gen4 of Gen5 while check 1's copies ran: the link trained down.
    const Finding slow = pcie_link_verdict({full, {16, 16, 4, 5}}, {loaded(5), loaded(4)});
    CHECK(slow.status == Status::warn);
    CHECK(
        contains(slow.summary, "PCIe links at a lower generation under load than they can have (GPU 1 Gen4 of Gen5)"));
    // The same reading at rest says nothing.
    CHECK(pcie_link_verdict({full, {16, 16, 4, 5}}, {loaded(5), {}}).status == Status::pass);
}

TEST_CASE("copies from the host under half of what the PCIe link carries warn; a link at rest is not judged") {
    CHECK(pcie_link_gbps(5, 16) == doctest::Approx(63.0).epsilon(0.01));
    CHECK(pcie_link_gbps(3, 8) == doctest::Approx(7.88));
    CHECK(pcie_link_gbps(7, 16) == 0.0);  // a generation not known here: not judged
    const PcieLink full{16, 16, 5, 5};
    // 55.2 GB/s on Gen5 x16 (an H200's): fine; 20 GB/s on the same link: under half of 63.
    CHECK(pcie_link_verdict({full}, {{55.2, 5}}).status == Status::pass);
    const Finding slow = pcie_link_verdict({full, full}, {{55.2, 5}, {20.0, 5}});
    CHECK(slow.status == Status::warn);
    CHECK(slow.summary ==
          "copies from pinned host memory under half of what the PCIe link carries (GPU 1 20.0 of "
          "63.0 GB/s)");
    CHECK(contains(slow.next, "replay counter"));
    CHECK(contains(slow.next, "NUMA node"));
    // Not measured, or the generation read at rest: no verdict on the rate.
    CHECK(pcie_link_verdict({full}, {{0.0, 5}}).status == Status::pass);
    CHECK(pcie_link_verdict({full}, {{20.0, 0}}).status == Status::pass);
}

TEST_CASE("a PCIe link is judged as it was during the copies: a link narrowed or slowed at rest is fine") {
    const PcieLink idle{8, 16, 1, 5};  // a laptop GPU at rest: x8 at Gen1 of x16 Gen5
    HostCopy copy;
    copy.gbps = 52.0;
    copy.generation_under_load = 5;
    copy.width_under_load = 16;
    const PcieLink loaded = link_under_load(idle, copy);
    CHECK(loaded.width == 16);
    CHECK(loaded.generation == 5);
    CHECK(pcie_link_verdict({loaded}, {copy}).status == Status::pass);
    // Still x8 under load: a narrow link.
    copy.width_under_load = 8;
    CHECK(contains(pcie_link_verdict({link_under_load(idle, copy)}, {copy}).summary, "GPU 0 x8 of x16"));
    // Not measured: the link as read at rest.
    CHECK(link_under_load(idle, HostCopy{}).width == 8);
    CHECK(link_under_load(idle, HostCopy{}).generation == 1);
}

TEST_CASE("a PCIe link that resent packets during check 1's copies warns") {
    const PcieLink full{16, 16, 5, 5};
    // None resent, or unknown (-1: a VM's NVML may not say): fine.
    CHECK(pcie_link_verdict({full, full}, {{55.2, 5, 0}, {55.2, 5, -1}}).status == Status::pass);
    const Finding resent = pcie_link_verdict({full, full, full}, {{55.2, 5, 0}, {54.8, 5, 12}, {55.0, 5, 3}});
    CHECK(resent.status == Status::warn);
    CHECK(resent.summary ==
          "PCIe links that resent packets during check 1's copies (GPU 1: 12, GPU 2: 3; a healthy link resends "
          "none): link errors, which slow every transfer over the link");
    CHECK(contains(resent.next, "reseat the card"));
    CHECK_FALSE(contains(resent.next, "NUMA node"));  // the copies' rate was fine
}

TEST_CASE("NCCL's log: connections with their transports, and warnings") {
    std::istringstream log(
        "host:1:2 [0] NCCL INFO Bootstrap : Using eth0\n"
        "host:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read\n"
        "host:1:2 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] via P2P/CUMEM/read\n"
        "host:1:3 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] [send] via SHM/direct/direct\n"
        "host:1:3 [1] NCCL INFO Channel 00/0 : 1[1] -> 2[2] [receive] via NET/IB/0/GDRDMA\n"
        "host:1:3 [1] NCCL WARN Cuda failure 'out of memory'\n"
        "host:1:3 [1] NCCL INFO Channel garbage line -> via\n");
    const NcclLog parsed = parse_nccl_log(log);
    REQUIRE(parsed.transports.size() == 3);
    CHECK(parsed.transports.at({0, 1}) == std::set<std::string>{"P2P/CUMEM/read"});
    CHECK(parsed.transports.at({1, 0}) == std::set<std::string>{"SHM/direct/direct"});
    CHECK(parsed.transports.at({1, 2}) == std::set<std::string>{"NET/IB/0/GDRDMA"});
    REQUIRE(parsed.warnings.size() == 1);
    CHECK(parsed.warnings[0] == "Cuda failure 'out of memory'");
    CHECK(transport_family("P2P/CUMEM/read") == "P2P");
    CHECK(transport_cell("P2P/CUMEM/read") == "P2P");
    CHECK(transport_cell("NET/Socket/0") == "NET/Socket");
    CHECK(transport_cell("NET/IB/0/GDRDMA") == "NET/IB");
    CHECK(transport_without_nic("NET/IB/0/GDRDMA") == "NET/IB/GDRDMA");
    CHECK(transport_without_nic("NET/IB/1(0)/GDRDMA") == "NET/IB/GDRDMA");
    CHECK(transport_without_nic("NET/Socket/0") == "NET/Socket");
    CHECK(transport_without_nic("NET/IB") == "NET/IB");
    CHECK(transport_without_nic("P2P/CUMEM/read") == "P2P/CUMEM/read");

    const auto lines = transport_lines(parsed, 3, true);
    REQUIRE(lines.size() == 5);
    CHECK(lines[2] == "     GPU0        X      P2P        -");
    CHECK(lines[3] == "     GPU1      SHM        X   NET/IB");
    CHECK(contains(transport_lines(NcclLog{}, 2, false).front(), "NCCL_DEBUG=INFO"));
    CHECK(warning_lines(parsed) == std::vector<std::string>{"NCCL WARN Cuda failure 'out of memory'"});
    // A failure shows the warnings, then the last info lines: where NCCL got to.
    const std::vector<std::string> failure = failure_lines(parsed);
    REQUIRE(failure.size() == 8);
    CHECK(failure[0] == "NCCL WARN Cuda failure 'out of memory'");
    CHECK(failure[1] == "NCCL's last log lines (where it got to; [n] is the GPU):");
    CHECK(failure[2] == "  [0] NCCL INFO Bootstrap : Using eth0");
    CHECK(failure[7] == "  [1] NCCL INFO Channel garbage line -> via");
    // Only the last few: a long log keeps its end.
    std::istringstream long_log([] {
        std::string text;
        for (int i = 0; i < 20; ++i) text += "host:1:2 [0] NCCL INFO step " + std::to_string(i) + "\n";
        return text;
    }());
    const NcclLog long_parsed = parse_nccl_log(long_log);
    REQUIRE(long_parsed.last_info.size() == NcclLog::kLastInfoLines);
    CHECK(long_parsed.last_info.front() == "[0] NCCL INFO step 12");
    CHECK(long_parsed.last_info.back() == "[0] NCCL INFO step 19");
}

TEST_CASE("NCCL's log: the settings NCCL says it read, from the environment or a config file") {
    std::istringstream log(
        "host:1:2 [0] NCCL INFO NCCL_P2P_DISABLE set by environment to 1\n"
        "host:1:2 [0] NCCL INFO NCCL_SHM_DISABLE set by environment to 1.\n"
        "host:1:2 [0] NCCL INFO NCCL_P2P_LEVEL set by environment to NVL\n"
        "host:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via NET/Socket/0\n");
    const NcclLog parsed = parse_nccl_log(log);
    CHECK(parsed.settings == std::map<std::string, std::string>{
                                 {"NCCL_P2P_DISABLE", "1"}, {"NCCL_P2P_LEVEL", "NVL"}, {"NCCL_SHM_DISABLE", "1"}});
    CHECK(parsed.transports.at({0, 1}) == std::set<std::string>{"NET/Socket/0"});
}

TEST_CASE("check 5 times 1 MiB, 32 MiB and --nccl-mib, none above it; the summary reports 32 MiB") {
    CHECK(nccl_check_sizes(256 * kMiB) == std::vector<size_t>{kMiB, 32 * kMiB, 256 * kMiB});
    CHECK(nccl_check_sizes(32 * kMiB) == std::vector<size_t>{kMiB, 32 * kMiB});
    CHECK(nccl_check_sizes(8 * kMiB) == std::vector<size_t>{kMiB, 8 * kMiB});
    CHECK(nccl_check_sizes(kMiB) == std::vector<size_t>{kMiB});
    const std::vector<SweepRow> rows{{kMiB, 2e-5, 0, ""}, {32 * kMiB, 2e-4, 0, ""}, {256 * kMiB, 1e-3, 0, ""}};
    CHECK(nccl_summary_row(rows).bytes == 32 * kMiB);
    CHECK(nccl_summary_row({rows[0]}).bytes == kMiB);
}

TEST_CASE("check 5's table says how it timed, and gives time, algbw and busbw per size") {
    AllreduceSweepOptions timing;
    const std::vector<SweepRow> rows{{kMiB, 25e-6, 0, ""}, {256 * kMiB, 1e-3, 0, ""}};
    const auto lines = nccl_timing_lines(rows, 2, timing);
    REQUIRE(lines.size() == 5);
    CHECK(contains(lines[0], "up to 5 warm-up calls, the median of 5 batches of 20 back-to-back calls"));
    CHECK(contains(lines[1], "between CUDA events on every GPU's stream, the slowest GPU's time per batch"));
    CHECK(lines[2] == "      size  calls/batch   time(us)  algbw(GB/s)  busbw(GB/s)");
    CHECK(lines[3] == "     1 MiB           20       25.0         41.9         41.9");
    // 256 MiB: 4 calls keep a batch within 1 GiB; 2 GPUs: busbw = algbw
    CHECK(lines[4] == "   256 MiB            4     1000.0        268.4        268.4");
    CHECK(contains(nccl_timing_lines(rows, 4, timing)[4], "268.4        402.7"));  // 4 GPUs: busbw = 1.5 algbw
}

TEST_CASE("a bus bandwidth under a quarter of the P2P copies' is named; a healthy one, or none to compare, is not") {
    const SweepRow healthy{256 * kMiB, 268435456 / 290e9, 0, ""};  // 290 GB/s: NVLink H200s, 76% of 381
    const SweepRow slow{256 * kMiB, 268435456 / 22e9, 0, ""};      // 22 GB/s: through host memory
    const bool all_peers = true;
    CHECK(low_bus_bandwidth(healthy, 2, 381.0, all_peers).empty());
    CHECK(low_bus_bandwidth(slow, 2, 381.0, all_peers) ==
          "busbw 22.0 GB/s at 256 MiB is 6% of the 381.0 GB/s one way that the P2P copies of check 4 reached");
    CHECK(low_bus_bandwidth(SweepRow{256 * kMiB, 268435456 / 96e9, 0, ""}, 2, 381.0, all_peers).empty());  // 25%
    CHECK(low_bus_bandwidth(slow, 2, std::nan(""), all_peers).empty());                        // check 4 did not run
    CHECK(low_bus_bandwidth(slow, 1, 381.0, all_peers).empty());                               // one GPU
    CHECK(low_bus_bandwidth(SweepRow{kMiB, kMiB / 5e9, 0, ""}, 2, 381.0, all_peers).empty());  // too small to tell
    const size_t smallest = kLinkComparisonMinBytes;  // 32 MiB: large enough to tell
    CHECK(!low_bus_bandwidth(SweepRow{smallest, double(smallest) / 22e9, 0, ""}, 2, 381.0, all_peers).empty());
    // Bridged pairs (0-1, 2-3) with no peer access between them: the ring crosses host memory, as it must.
    CHECK(low_bus_bandwidth(slow, 4, 381.0, false).empty());
    CHECK(link_comparison_line(slow, 4, 381.0, false) ==
          "links: bus bandwidth not compared with check 4's P2P copies: some pairs of GPUs have no peer access "
          "(check 2), so NCCL's rings may go through host memory between them");
    CHECK(link_comparison_line(healthy, 2, 381.0, all_peers) ==
          "links: busbw 290.0 GB/s at 256 MiB is 76% of the 381.0 GB/s one way of check 4's P2P copies (WARN below "
          "25%, at 32 MiB or more)");
    CHECK(link_comparison_line(healthy, 1, 381.0, all_peers) == "links: one GPU, nothing to compare");
}

TEST_CASE("SHM or NET between GPUs with peer access is named with its cause; without peer access it is not") {
    std::istringstream text(
        "h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via SHM/direct/direct\n"
        "h:1:2 [1] NCCL INFO Channel 00/0 : 1[1] -> 2[2] via SHM/direct/direct\n"
        "h:1:2 [2] NCCL INFO Channel 00/0 : 2[2] -> 3[3] via P2P/CUMEM/read\n"
        "h:1:2 [3] NCCL INFO Channel 00/0 : 3[3] -> 0[0] via NET/Socket/0\n");
    const NcclLog log = parse_nccl_log(text);
    const auto all_peers = [](int, int) { return true; };
    const Variables p2p_disabled{{"NCCL_P2P_DISABLE", "1"}};

    const auto problems = transports_around_peer_access(log, 4, all_peers, p2p_disabled).problems;
    REQUIRE(problems.size() == 2);
    CHECK(problems[0] ==
          "NCCL uses SHM between 2 pairs of GPUs that have peer access (GPU 0 and GPU 1, GPU 1 and GPU 2): "
          "NCCL_P2P_DISABLE=1 is set");
    CHECK(problems[1] == "NCCL uses NET between GPU 0 and GPU 3, which have peer access: NCCL_P2P_DISABLE=1 is set");

    // GPU 1 has peer access to nobody: only the pair 0-3 is left, over NET.
    const auto without_gpu_1 = [](int i, int j) { return i != 1 && j != 1; };
    CHECK(transports_around_peer_access(log, 4, without_gpu_1, {}).problems.size() == 1);
    // Peer access one way only is not peer access.
    const PeerLinkFindings one_way = transports_around_peer_access(log, 2, [](int i, int) { return i == 0; }, {});
    CHECK(one_way.problems.empty());
    CHECK(one_way.notes.empty());
    // All P2P: nothing to say.
    std::istringstream p2p_text("h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read\n");
    const PeerLinkFindings all_p2p = transports_around_peer_access(parse_nccl_log(p2p_text), 2, all_peers, {});
    CHECK(all_p2p.problems.empty());
    CHECK(all_p2p.notes.empty());
    // SHM that no setting explains is NCCL's own choice (its default across a CPU): a note, not a problem.
    // NET on one node stays a problem, with or without a setting.
    const PeerLinkFindings unexplained = transports_around_peer_access(log, 4, all_peers, {});
    REQUIRE(unexplained.notes.size() == 1);
    CHECK(contains(unexplained.notes[0], "NCCL uses SHM between 2 pairs of GPUs that have peer access"));
    CHECK(contains(unexplained.notes[0], "NCCL ruled P2P out itself"));
    REQUIRE(unexplained.problems.size() == 1);
    CHECK(contains(unexplained.problems[0], "NCCL uses NET between GPU 0 and GPU 3"));
    // Within one process (one host), NET between GPUs without peer access is a problem too, where asked to judge
    // them: their path is shared memory, which NCCL_SHM_DISABLE takes away.
    const auto everywhere = [](int, int) { return true; };
    const PeerLinkFindings no_peers =
        transports_around_peer_access(log, 4, without_gpu_1, {{"NCCL_SHM_DISABLE", "1"}}, "GPU", everywhere);
    CHECK(no_peers.problems.size() == 1);  // NET between GPU 0 and GPU 3 (peer access): not this one
    std::istringstream no_p2p_text("h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via NET/Socket/0\n");
    const NcclLog no_p2p = parse_nccl_log(no_p2p_text);
    const auto nobody = [](int, int) { return false; };
    CHECK(transports_around_peer_access(no_p2p, 2, nobody, {{"NCCL_SHM_DISABLE", "1"}}).problems.empty());
    const PeerLinkFindings crawling =
        transports_around_peer_access(no_p2p, 2, nobody, {{"NCCL_SHM_DISABLE", "1"}}, "GPU", everywhere);
    REQUIRE(crawling.problems.size() == 1);
    CHECK(crawling.problems[0] ==
          "NCCL uses NET between GPU 0 and GPU 1, which have no peer access, on one host: NCCL_SHM_DISABLE=1 is set");
    // Each kind of problem gets its own advice: shared memory's here, the peer links' where they have some.
    CHECK(crawling.advice() == kSharedMemoryUnusedAdvice);
    CHECK(transports_around_peer_access(log, 4, all_peers, p2p_disabled).advice() == kPeerLinksUnusedAdvice);
    CHECK(all_p2p.advice().empty());
}

TEST_CASE("the cause of SHM or NET: a setting from the environment or a config file, or what NCCL does itself") {
    NcclLog log;
    // From the environment: doctor sees it too.
    CHECK(nccl_peer_link_cause("SHM", log, {{"NCCL_P2P_DISABLE", "1"}}).text == "NCCL_P2P_DISABLE=1 is set");
    // From /etc/nccl.conf: only NCCL's log has it.
    log.settings["NCCL_P2P_DISABLE"] = "1";
    CHECK(nccl_peer_link_cause("SHM", log, {}).text ==
          "NCCL_P2P_DISABLE=1 is set in an NCCL config file (NCCL_CONF_FILE, ~/.nccl.conf or /etc/nccl.conf)");
    // NET needs shared memory off too, which SHM does not.
    log.settings["NCCL_SHM_DISABLE"] = "1";
    const Variables both{{"NCCL_P2P_DISABLE", "1"}, {"NCCL_SHM_DISABLE", "1"}};
    CHECK(nccl_peer_link_cause("NET", log, both).text == "NCCL_P2P_DISABLE=1 and NCCL_SHM_DISABLE=1 are set");
    CHECK(nccl_peer_link_cause("NET", log, {{"NCCL_SHM_DISABLE", "1"}}).text ==
          "NCCL_P2P_DISABLE=1 and NCCL_SHM_DISABLE=1 are set, NCCL_P2P_DISABLE in an NCCL config file (NCCL_CONF_FILE, "
          "~/.nccl.conf or /etc/nccl.conf)");
    CHECK(nccl_peer_link_cause("SHM", log, both).text == "NCCL_P2P_DISABLE=1 is set");
    // A value that turns nothing off is no cause: NCCL_P2P_DISABLE other than 1, and an NCCL_P2P_LEVEL that
    // allows P2P as far as NCCL's default (PXB) or further. A level below it is a cause, by name or by
    // NCCL's old numbers (0 is LOC, 1 is PIX).
    for (const char* value : {"0", "2", "yes"})
        CHECK(contains(nccl_peer_link_cause("SHM", NcclLog{}, {{"NCCL_P2P_DISABLE", value}}).text,
                       "no NCCL setting explains it"));
    for (const char* value : {"PXB", "PHB", "SYS", "2", "3", "5", "bogus"})
        CHECK(contains(nccl_peer_link_cause("SHM", NcclLog{}, {{"NCCL_P2P_LEVEL", value}}).text,
                       "no NCCL setting explains it"));
    for (const char* value : {"LOC", "NVL", "NVB", "C2C", "PIX", "0", "1"})
        CHECK(nccl_peer_link_cause("SHM", NcclLog{}, {{"NCCL_P2P_LEVEL", value}}).text ==
              "NCCL_P2P_LEVEL=" + std::string(value) + " is set");
    CHECK(contains(nccl_peer_link_cause("NET", NcclLog{}, {}).text, "NCCL_DEBUG=INFO"));
    CHECK(nccl_peer_link_cause("SHM", NcclLog{}, {{"NCCL_P2P_DISABLE", "1"}}).setting);
    CHECK_FALSE(nccl_peer_link_cause("SHM", NcclLog{}, {}).setting);
}

TEST_CASE("P2P data: correct, zeros, nothing arrived, partly wrong") {
    const size_t words = 64;
    std::vector<uint32_t> data(words);
    for (size_t i = 0; i < words; ++i) data[i] = pattern_word(1, i);
    CHECK(check_pattern(data.data(), words, 1).ok());
    CHECK(describe(check_pattern(data.data(), words, 1)) == "ok");
    CHECK(!check_pattern(data.data(), words, 2).ok());  // another GPU's data is wrong data

    std::vector<uint32_t> zeros(words, 0), poison(words, kPoisonWord);
    CHECK(describe(check_pattern(zeros.data(), words, 1)) == "all 64 words are zero");
    CHECK(describe(check_pattern(poison.data(), words, 1)) == "nothing arrived (all 64 words unchanged)");
    for (size_t i = words / 2; i < words; ++i) data[i] = 0;
    CHECK(describe(check_pattern(data.data(), words, 1)) == "32 of 64 words wrong (32 zero), first at word 32");
    for (size_t i = words / 2; i < words; ++i) data[i] = kPoisonWord;  // half arrived: not "nothing arrived"
    CHECK(describe(check_pattern(data.data(), words, 1)) == "32 of 64 words wrong (32 unchanged), first at word 32");
}

TEST_CASE("pattern words are odd: never zero, never the poison") {
    int bad = 0;
    for (int gpu = 0; gpu < 8; ++gpu)
        for (size_t i = 0; i < 100000; ++i) bad += pattern_word(gpu, i) % 2 == 0 || pattern_word(gpu, i) == kPoisonWord;
    CHECK(bad == 0);
}

namespace {

// The records of ranks on these hosts with GPUs at these PCI bus ids, rank r on its host's GPU r % 2.
std::vector<RankRecord> ranks_on(const std::vector<const char*>& hosts, const std::vector<const char*>& buses) {
    std::vector<RankRecord> records(hosts.size());
    for (size_t r = 0; r < records.size(); ++r) {
        std::snprintf(records[r].host, sizeof records[r].host, "%s", hosts[r]);
        std::snprintf(records[r].bus_id, sizeof records[r].bus_id, "%s", buses[r]);
        records[r].device = int(r % 2);
    }
    return records;
}

}  // namespace

TEST_CASE("MPI ranks: check 1 on the GPUs rank 0 does not see, as each rank examined its own") {
    std::vector<RankRecord> records =
        ranks_on({"a", "a", "b", "b"}, {"0000:18:00.0", "0000:2A:00.0", "0000:18:00.0", "0000:2A:00.0"});
    for (int r = 0; r < 4; ++r)
        records[r].gpu_check = r == 0 ? -1 : int(Status::pass);  // rank 0's GPU is check 1's own
    const std::vector<std::string> rank0_sees{"0000:18:00.0", "0000:2A:00.0"};
    // All healthy: one line naming them (each by its rank's ordinal), PASS.
    Finding verdict = unseen_gpus_verdict(records, rank0_sees);
    CHECK(verdict.status == Status::pass);
    REQUIRE(verdict.details.size() == 1);
    CHECK(verdict.details[0] ==
          "check 1 (clocks, power limit, other processes) on the GPUs rank 0 does not see: PASS on rank 2's GPU 0 (b "
          "0000:18:00.0), rank 3's GPU 1 (b 0000:2A:00.0)");
    // One throttled, one that NVML could not read: WARN naming the first, its advice on its host; the SKIP
    // in its line.
    const auto examined = [&](int r, Status status, const char* summary, const char* next) {
        records[r].gpu_check = int(status);
        std::snprintf(records[r].gpu_check_summary, sizeof records[r].gpu_check_summary, "%s", summary);
        std::snprintf(records[r].gpu_check_next, sizeof records[r].gpu_check_next, "%s", next);
    };
    examined(3, Status::warn, "clocks lowered by GPU 1: hardware thermal slowdown", "check cooling and power");
    examined(2, Status::skip, "NVML could not read its clocks (not found)", "");
    verdict = unseen_gpus_verdict(records, rank0_sees);
    CHECK(verdict.status == Status::warn);
    CHECK(verdict.summary ==
          "check 1 on rank 3's GPU 1 (b 0000:2A:00.0): clocks lowered by GPU 1: hardware thermal "
          "slowdown");
    CHECK(verdict.next == "on host b: check cooling and power");
    CHECK(verdict.details ==
          std::vector<std::string>{"check 1 on rank 2's GPU 0 (b 0000:18:00.0): SKIP  NVML could not read its clocks "
                                   "(not found)",
                                   "check 1 on rank 3's GPU 1 (b 0000:2A:00.0): WARN  clocks lowered by GPU 1: "
                                   "hardware thermal slowdown; try: check cooling and power"});
    // Two that warn: the first in the summary, a count of the rest.
    examined(2, Status::warn, "power limit lowered", "");
    CHECK(unseen_gpus_verdict(records, rank0_sees).summary.find("(and 1 more GPU below)") != std::string::npos);
    // A large job: the first four GPUs' lines, then a count.
    std::vector<RankRecord> many(7, records[3]);
    many[0] = records[0];
    for (int r = 1; r < 7; ++r) std::snprintf(many[r].host, sizeof many[r].host, "host%d", r);
    verdict = unseen_gpus_verdict(many, rank0_sees);
    CHECK(verdict.details.size() == 5);
    CHECK(verdict.details.back() == "and 2 more GPUs that did not pass (each rank's gpu_check in the JSON's mapping)");
    CHECK(verdict.summary.find("(and 5 more GPUs below)") != std::string::npos);
    // Rank 0 sees only its own GPU (a CUDA_VISIBLE_DEVICES per rank): rank 1's, on its host, is examined by
    // rank 1; a rank that did not examine its GPU is named as not examined.
    records[2].gpu_check = records[3].gpu_check = -1;
    verdict = unseen_gpus_verdict(records, {"0000:18:00.0"});
    CHECK(verdict.status == Status::pass);
    REQUIRE(verdict.details.size() == 2);
    CHECK(verdict.details[0].find("PASS on rank 1's GPU 1 (a 0000:2A:00.0)") != std::string::npos);
    CHECK(verdict.details[1].find("check 1 did not examine rank 2's GPU 0 (b 0000:18:00.0), rank 3's GPU 1 (b "
                                  "0000:2A:00.0): for their links") == 0);
    // Every GPU seen: nothing to say.
    CHECK(unseen_gpus_verdict({records[0], records[1]}, rank0_sees).details.empty());
}

TEST_CASE("MPI ranks: two ranks on one GPU of one host are found, the same bus id on two hosts is not") {
    std::vector<RankRecord> records =
        ranks_on({"a", "a", "a", "b"}, {"0000:18:00.0", "0000:2A:00.0", "0000:18:00.0", "0000:18:00.0"});
    for (RankRecord& record : records) {
        std::snprintf(record.visible_devices, sizeof record.visible_devices, "(unset)");
        record.visible_gpus = 2;
    }
    const auto shared = shared_gpus(records);
    REQUIRE(shared.size() == 1);
    CHECK(shared[0] == "ranks 0 and 2 on a share GPU 0000:18:00.0");
    // Host names as long as Linux allows (64 bytes), differing only in the last: a host each, no GPU shared.
    std::vector<RankRecord> long_names = records;
    const std::string stem(62, 'n');
    for (int r = 0; r < 4; ++r) std::snprintf(long_names[r].host, sizeof long_names[r].host, "%s-%d", stem.c_str(), r);
    CHECK(shared_gpus(long_names).empty());
    // Check 1 ran on rank 0 and saw host a's 0000:18:00.0 only: the others' GPUs, once a rank.
    CHECK(ranks_check_1_did_not_see(records, {"0000:18:00.0"}) == std::vector<int>{1, 3});
    CHECK(ranks_check_1_did_not_see(records, {"0000:18:00.0", "0000:2A:00.0"}) == std::vector<int>{3});
    // What must not differ between the ranks: here nothing (the records above leave it empty alike).
    CHECK(rank_differences(records).empty());
    // An NCCL_* variable exported on one host and not handed to the other's ranks, and another NCCL there.
    std::vector<RankRecord> apart = records;
    for (RankRecord& record : apart) std::snprintf(record.nccl_version, sizeof record.nccl_version, "2.28.3");
    for (RankRecord& record : apart)
        std::snprintf(record.nccl_settings, sizeof record.nccl_settings, "NCCL_DEBUG=WARN");
    set_nccl_settings(apart[0], {"NCCL_SOCKET_IFNAME=ib0", "NCCL_DEBUG=WARN"});
    set_nccl_settings(apart[1], {"NCCL_DEBUG=WARN", "NCCL_SOCKET_IFNAME=ib0"});
    std::snprintf(apart[3].nccl_version, sizeof apart[3].nccl_version, "2.21.5");
    const std::vector<RankDifference> differences = rank_differences(apart);
    REQUIRE(differences.size() == 2);
    CHECK(differences[0].line == "NCCL: 2.28.3 on ranks 0, 1, 2; 2.21.5 on rank 3");
    CHECK(differences[1].line == "NCCL_SOCKET_IFNAME: ib0 on ranks 0, 1; unset on ranks 2, 3");  // NCCL_DEBUG agrees
    CHECK_FALSE(differences[1].may_be_intended);
    CHECK(contains(rank_differences_advice(differences), "give every rank the same"));
    // Each host's own interface name, set on every rank: maybe meant so, and a value may hold spaces.
    std::vector<RankRecord> own_names = records;
    for (size_t r = 0; r < own_names.size(); ++r)
        set_nccl_settings(own_names[r], {"NCCL_DEBUG_SUBSYS=INIT, NET",
                                         r < 2 ? "NCCL_SOCKET_IFNAME=eth0" : "NCCL_SOCKET_IFNAME=ib0"});
    const std::vector<RankDifference> own = rank_differences(own_names);
    REQUIRE(own.size() == 1);
    CHECK(own[0].line == "NCCL_SOCKET_IFNAME: eth0 on ranks 0, 1; ib0 on ranks 2, 3");
    CHECK(own[0].may_be_intended);
    CHECK(contains(rank_differences_advice(own), "check that the different values are meant"));
    // More variables than fit: whole ones only, and how many were left out.
    RankRecord crowded;
    std::vector<std::string> many;
    for (int i = 0; i < 200; ++i) many.push_back("NCCL_X" + std::to_string(1000 + i) + "=0123456789");
    set_nccl_settings(crowded, many);
    CHECK(crowded.nccl_settings_left_out > 0);
    const std::string kept = crowded.nccl_settings;
    CHECK(kept.size() < sizeof crowded.nccl_settings);
    CHECK(kept.back() == '\n');
    CHECK(kept.substr(kept.rfind('\n', kept.size() - 2) + 1).size() == std::string("NCCL_X1000=0123456789\n").size());
    // ... and a name that another rank sets but that is not among the crowded rank's kept ones is unknown
    // there, not "unset".
    std::vector<RankRecord> two(2, crowded);
    std::vector<std::string> shifted(many.begin() + 1, many.end());  // rank 1 keeps one more at the end
    set_nccl_settings(two[1], shifted);
    REQUIRE(two[1].nccl_settings_left_out > 0);
    CHECK(rank_differences(two).empty());
    shifted.front() = "NCCL_X1001=other";
    set_nccl_settings(two[1], shifted);
    REQUIRE(rank_differences(two).size() == 1);
    CHECK(rank_differences(two)[0].line == "NCCL_X1001: 0123456789 on rank 0; other on rank 1");
    // A value too long for the record still leaves its name: a variable another rank lacks is "unset" there.
    std::vector<RankRecord> long_value(2);
    const std::string huge = "NCCL_HUGE=" + std::string(3000, 'x');
    set_nccl_settings(long_value[0], {"NCCL_SOCKET_IFNAME=ib0", huge});
    set_nccl_settings(long_value[1], {huge});
    REQUIRE(long_value[1].nccl_settings_left_out == 1);
    REQUIRE(rank_differences(long_value).size() == 1);
    CHECK(rank_differences(long_value)[0].line == "NCCL_SOCKET_IFNAME: ib0 on rank 0; unset on rank 1");
    // ... and a variable whose long value did not fit, set on one rank only, is a difference too.
    std::vector<RankRecord> long_one_sided(2);
    set_nccl_settings(long_one_sided[0], {"NCCL_SOCKET_IFNAME=" + std::string(3000, 'e')});
    set_nccl_settings(long_one_sided[1], {});
    REQUIRE(rank_differences(long_one_sided).size() == 1);
    CHECK(rank_differences(long_one_sided)[0].line ==
          "NCCL_SOCKET_IFNAME: set (value not compared) on rank 0; unset on rank 1");
    CHECK_FALSE(rank_differences(long_one_sided)[0].may_be_intended);
    // A newline in a value stays within its line.
    RankRecord newline;
    set_nccl_settings(newline, {"NCCL_DEBUG_FILE=a\nNCCL_B=1"});
    CHECK(std::string(newline.nccl_settings) == "NCCL_DEBUG_FILE=a\\x0aNCCL_B=1\n");
    // A failed NCCL over MPI: across hosts the advice is the network's, on one host check 5's; where NCCL
    // found no network interface (rank 0 could not make its id), the interface's on either; where it could
    // not make its shared memory, /dev/shm's.
    const std::vector<RankOutcome> failed(4);
    CHECK(contains(nccl_over_mpi_advice(records, failed), "the ranks are on 2 hosts"));
    CHECK(contains(nccl_over_mpi_advice(records, failed), "NCCL_SOCKET_IFNAME"));
    CHECK(nccl_over_mpi_advice({records[0], records[1]}, failed) == std::string(kNcclAdvice));
    std::vector<RankOutcome> no_interface(2);
    std::snprintf(no_interface[0].error, sizeof no_interface[0].error, "%s",
                  "NCCL call `ncclGetUniqueId(&id)` failed at nccl_comm.cpp:284: invalid usage (run with "
                  "NCCL_DEBUG=WARN for details) (NCCL's last warning: Bootstrap : no socket interface found)");
    std::snprintf(no_interface[1].error, sizeof no_interface[1].error, "%s",
                  "rank 0 could not make NCCL's id (ncclGetUniqueId; rank 0's message says why)");
    CHECK(nccl_over_mpi_advice({records[0], records[1]}, no_interface) == std::string(kNcclInterfaceAdvice));
    CHECK(nccl_over_mpi_advice(records, no_interface) == std::string(kNcclInterfaceAdvice));
    CHECK(nccl_failure_advice(no_interface[0].error) == std::string(kNcclInterfaceAdvice));
    CHECK(nccl_failure_advice("unhandled system error: connection refused") == std::string(kNcclAdvice));
    // NCCL's shared memory in a container's small /dev/shm: its advice, not P2P's, on one host or several.
    std::vector<RankOutcome> no_shared_memory(2);
    std::snprintf(no_shared_memory[1].error, sizeof no_shared_memory[1].error, "%s",
                  "NCCL communicator creation on rank 1 of 2: failed: unhandled system error (NCCL's last warning: "
                  "Error while creating shared memory segment /dev/shm/nccl-3HGwkv (size 9637888), error: No space "
                  "left on device (28))");
    CHECK(nccl_failure_advice(no_shared_memory[1].error) == std::string(kNcclSharedMemoryAdvice));
    CHECK(nccl_over_mpi_advice({records[0], records[1]}, no_shared_memory) == std::string(kNcclSharedMemoryAdvice));
    CHECK(contains(kNcclSharedMemoryAdvice, "--shm-size"));
    // A timeout carries none of NCCL's words: the warnings of its log show what NCCL was doing, and their
    // advice counts as the error's would.
    std::vector<RankOutcome> timed_out(6);
    for (size_t r = 0; r < timed_out.size(); ++r) {
        std::snprintf(timed_out[r].error, sizeof timed_out[r].error, "%s",
                      "NCCL communicator creation on rank 1 of 2: not finished after 30 s (--timeout)");
        std::istringstream log(
            "h:1:1 [0] NCCL WARN Error while creating shared memory segment /dev/shm/nccl-x\n"
            "h:1:1 [0] NCCL INFO Bootstrap : Using eth0\n");
        set_nccl_warnings(timed_out[r], parse_nccl_log(log));
    }
    CHECK(std::string(timed_out[0].nccl_warnings) ==
          "NCCL WARN Error while creating shared memory segment /dev/shm/nccl-x\n");
    CHECK(nccl_over_mpi_advice({records[0], records[1]}, timed_out) == std::string(kNcclSharedMemoryAdvice));
    const std::vector<std::string> warnings = nccl_warning_lines(timed_out);
    REQUIRE(warnings.size() == 5);  // four ranks' lines, then the rest counted
    CHECK(warnings[0] == "rank 0: NCCL WARN Error while creating shared memory segment /dev/shm/nccl-x");
    CHECK(warnings[3] == "rank 3: NCCL WARN Error while creating shared memory segment /dev/shm/nccl-x");
    CHECK(warnings[4] == "and 2 more ranks with NCCL warnings");
    CHECK(nccl_warning_lines(failed).empty());

    std::vector<RankOutcome> outcomes(4);
    for (auto& outcome : outcomes) outcome.wrong = 0;
    outcomes[3].wrong = -1;
    std::snprintf(outcomes[3].error, sizeof outcomes[3].error, "timed out");
    const auto lines = mapping_lines(records, outcomes);
    REQUIRE(lines.size() == 5);
    CHECK(contains(lines[0], "CUDA_VISIBLE_DEVICES"));
    CHECK(contains(lines[1], "0000:18:00.0"));
    CHECK(contains(lines[1], "correct"));
    CHECK(contains(lines[4], "timed out"));
    CHECK(contains(mapping_lines(records, {})[1], "not run"));
    // A rank given 8 GPUs by UUID keeps the whole list in its line (327 characters).
    std::string uuids;
    for (int gpu = 0; gpu < 8; ++gpu)
        uuids += (gpu ? "," : "") + std::string("GPU-") + std::to_string(gpu) + "bc7d2f1-5c1e-2b4a-9d3f-0a1b2c3d4e5f";
    REQUIRE(uuids.size() == 327);
    std::snprintf(records[0].visible_devices, sizeof records[0].visible_devices, "%s", uuids.c_str());
    CHECK(contains(mapping_lines(records, outcomes)[1], uuids + " "));
    // A newline in it is escaped: the table keeps one line per rank.
    std::snprintf(records[0].visible_devices, sizeof records[0].visible_devices, "0\n1");
    CHECK(contains(mapping_lines(records, outcomes)[1], "0\\x0a1 "));
    CHECK(mapping_lines(records, outcomes)[1].find('\n') == std::string::npos);
}

TEST_CASE("the allreduce's inputs are small integers whose float sum is exact") {
    // doctor's own inputs (nccl_allreduce.hpp), not the sweep's; up to the largest job they are exact for
    // (with (rank + 1) as inputs, 2190 ranks already summed to more than a float holds exactly)
    for (int ranks : {1, 2, 3, 4, 5, 6, 7, 8, 63, 64, 65, 129, 2190, 50000, 73000})
        for (size_t i = 0; i < 14; ++i) {
            CAPTURE(ranks);
            float sum = 0.0f;
            for (int rank = 0; rank < ranks; ++rank) sum += doctor::closed_form_input(rank, i);
            CHECK(sum == doctor::closed_form_sum(ranks, i));
            CHECK(double(doctor::closed_form_sum(ranks, i)) < 16777216.0);  // 2^24: every integer below is exact
        }
    // A result shifted by any offset, 7 elements included, reads wrong at most elements.
    for (size_t shift : {1, 2, 7, 14, 64, 4096}) {
        int same = 0;
        for (size_t i = 0; i < 7000; ++i)
            same += doctor::closed_form_sum(4, i) == doctor::closed_form_sum(4, i + shift);
        CHECK(same < 7000 / 4);  // by chance about 1 in 7
    }
}
