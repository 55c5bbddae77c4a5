#include "report.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <system_error>
#include <thread>

#include "errors.hpp"
#include "run_env.hpp"

namespace fwi::doctor {

const char* status_name(Status status) {
    switch (status) {
        case Status::pass:
            return "PASS";
        case Status::warn:
            return "WARN";
        case Status::fail:
            return "FAIL";
        case Status::skip:
            return "SKIP";
    }
    return "?";
}

const std::vector<CheckInfo>& all_checks() {
    static const std::vector<CheckInfo> checks{
        {"devices", "driver, runtime and devices"},
        {"topology", "topology: peer access and links between GPUs"},
        {"p2p", "P2P works: peer copies and peer reads, data verified"},
        {"bandwidth", "P2P bandwidth and latency (copy engines)"},
        {"nccl", "NCCL allreduce over all GPUs of this process"},
        {"host", "host: shared memory, stack limit, IOMMU, ACS"},
        {"mpi", "MPI: ranks and their GPUs, CUDA-aware MPI, NCCL over MPI"},
    };
    return checks;
}

std::vector<std::string> selectable_checks() {
    std::vector<std::string> ids;
    for (const CheckInfo& check : all_checks())
        if (std::string(check.id) != "devices" && std::string(check.id) != "topology") ids.push_back(check.id);
    return ids;
}

int check_number(const std::string& id) {
    const auto& checks = all_checks();
    for (size_t i = 0; i < checks.size(); ++i)
        if (id == checks[i].id) return static_cast<int>(i) + 1;
    throw std::invalid_argument("unknown check '" + id + "'");
}

const CheckInfo& check_info(const std::string& id) { return all_checks()[check_number(id) - 1]; }

Finding skipped(const std::string& id, const std::string& reason) {
    Finding finding;
    finding.id = id;
    finding.status = Status::skip;
    finding.summary = reason;
    return finding;
}

std::string format_finding(const Finding& finding) {
    const std::string indent(8, ' ');
    std::string text = std::string("  ") + status_name(finding.status) + "  " + finding.summary + "\n";
    for (const auto& line : finding.details) text += indent + line + "\n";
    if (!finding.next.empty()) text += indent + "try: " + finding.next + "\n";
    return text;
}

std::vector<std::string> format_matrix(int n, const std::string& corner, int width,
                                       const std::function<std::string(int, int)>& cell, const std::string& label) {
    std::vector<std::string> cells;
    size_t widest = std::max(corner.size(), (label + std::to_string(n - 1)).size());
    for (int row = 0; row < n; ++row)
        for (int column = 0; column < n; ++column) {
            cells.push_back(cell(row, column));
            widest = std::max(widest, cells.back().size());
        }
    const size_t column_width = std::max(size_t(width), widest + 1);  // at least one space between columns
    const auto padded = [column_width](const std::string& text) {
        return std::string(column_width - text.size(), ' ') + text;
    };
    std::vector<std::string> lines;
    std::string header = padded(corner);
    for (int column = 0; column < n; ++column) header += padded(label + std::to_string(column));
    lines.push_back(header);
    for (int row = 0; row < n; ++row) {
        std::string line = padded(label + std::to_string(row));
        for (int column = 0; column < n; ++column) line += padded(cells[size_t(row) * n + column]);
        lines.push_back(line);
    }
    return lines;
}

Report::Report(bool quiet, std::string json_path, std::string mode)
    : quiet_(quiet), json_path_(std::move(json_path)), mode_(std::move(mode)) {}

void Report::print(const std::string& text) const {
    if (quiet_) return;
    std::fputs(text.c_str(), stdout);
    std::fflush(stdout);
}

std::string Report::heading(const std::string& id) const {
    return "\n[" + std::to_string(check_number(id)) + "/" + std::to_string(all_checks().size()) + "] " +
           check_info(id).title + "\n";
}

void Report::begin(const std::string& id) {
    std::lock_guard<std::mutex> lock(mutex_);
    begun_ = id;
    print(heading(id));
}

void Report::add(Finding finding) {
    std::lock_guard<std::mutex> lock(mutex_);
    held_.erase(std::remove_if(held_.begin(), held_.end(), [&](const Finding& held) { return held.id == finding.id; }),
                held_.end());
    print(format_finding(finding));
    findings_.push_back(std::move(finding));
}

void Report::hold(Finding finding) {
    std::lock_guard<std::mutex> lock(mutex_);
    held_.push_back(std::move(finding));
}

void Report::set_no_gpu() {
    std::lock_guard<std::mutex> lock(mutex_);
    no_gpu_ = true;
}

void Report::set_fact(const std::string& key, const std::string& value) {
    std::lock_guard<std::mutex> lock(mutex_);
    facts_.add(key, value);
}

void Report::set_fact(const std::string& key, int value) {
    std::lock_guard<std::mutex> lock(mutex_);
    facts_.add(key, value);
}

int Report::exit_code_locked() const {
    if (no_gpu_) return kExitEnvironment;
    for (const auto& finding : findings_)
        if (finding.status == Status::fail) return kExitVerificationFailed;
    return kExitOk;
}

int Report::exit_code() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return exit_code_locked();
}

std::string Report::summary_line_locked() const {
    int counts[4] = {0, 0, 0, 0};
    std::string failed;
    for (const auto& finding : findings_) {
        ++counts[static_cast<int>(finding.status)];
        if (finding.status == Status::fail) failed += (failed.empty() ? "" : ", ") + finding.id;
    }
    char text[256];
    std::snprintf(text, sizeof text, "doctor: %d PASS, %d WARN, %d FAIL, %d SKIP in %.1f s", counts[0], counts[1],
                  counts[2], counts[3], timer_.seconds());
    std::string line = text;
    if (!failed.empty()) line += "; failed: " + failed;
    if (no_gpu_) line += "; no GPU visible";
    return line + " -> exit " + std::to_string(exit_code_locked());
}

JsonObject Report::json_locked() const {
    JsonObject checks;
    int counts[4] = {0, 0, 0, 0};
    for (const auto& finding : findings_) {
        ++counts[static_cast<int>(finding.status)];
        std::string details;
        for (const auto& line : finding.details) details += line + "\n";
        JsonObject check;
        check.add("number", check_number(finding.id))
            .add("title", check_info(finding.id).title)
            .add("status", status_name(finding.status))
            .add("summary", finding.summary)
            .add("next", finding.next)
            .add("details", details)
            .add("facts", finding.facts);
        checks.add(finding.id, check);
    }
    const int code = exit_code_locked();
    JsonObject result;
    result.add("program", "doctor")
        .add("mode", mode_)
        .add("status", code == kExitOk            ? "ok"
                       : code == kExitEnvironment ? "no_gpu"
                                                  : "failed")
        .add("exit_code", code)
        .add("total_seconds", timer_.seconds())
        .add("pass", counts[0])
        .add("warn", counts[1])
        .add("fail", counts[2])
        .add("skip", counts[3])
        .add("facts", facts_)
        .add("checks", checks);
    return result;
}

int Report::finish_locked() {
    finished_ = true;
    const int code = exit_code_locked();
    if (quiet_) return code;
    // The RESULT line carries the verdicts; the matrices and other figures go to --json only, written first:
    // a file that cannot be written ends the run with exit 3, and a summary or RESULT line printed before it
    // would name another exit code.
    const JsonObject full = json_locked();
    if (!json_path_.empty()) write_json_file(json_path_, full.str());
    print("\n" + summary_line_locked() + "\n");
    JsonObject verdicts;
    for (const auto& finding : findings_) verdicts.add(finding.id, status_name(finding.status));
    JsonObject result;
    result.add("kind", "doctor")
        .add("mode", mode_)
        .add("exit_code", code)
        .add("total_seconds", timer_.seconds())
        .add("facts", facts_)
        .add("checks", verdicts);
    emit_result(result, "");
    return code;
}

int Report::finish() {
    std::lock_guard<std::mutex> lock(mutex_);
    return finish_locked();
}

// How long Report::abandon gives the report to finish before it ends the process without it.
constexpr double kFinishingLimit = 5.0;

void Report::abandon(Finding finding) {
    // The fallback first, since what follows may block for good. Printing: standard output may be a pipe
    // whose reader stopped, its lock held by a thread blocked writing to it. Finishing: it asks the driver
    // about the GPUs for the RESULT's env, unless that was done before the check got stuck (main.cpp does
    // it in check 1), and if the driver is what is stuck, that hangs too. So the process ends this long
    // after the check was abandoned, with or without the finding and the RESULT line.
    const auto code = std::make_shared<std::atomic<int>>(kExitVerificationFailed);
    try {
        std::thread([code] {
            std::this_thread::sleep_for(std::chrono::duration<double>(kFinishingLimit));
            end_process_now(*code, "doctor: the RESULT line did not come within " + format_number(kFinishingLimit) +
                                       " s: ending without it\n");
        }).detach();
    } catch (const std::system_error&) {  // no thread to be had (a sick machine): report without the fallback
    }
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!finished_) {
            finding.status = Status::fail;
            finding.details.push_back("the checks not reported here did not run");
            // A check run ahead of its turn (check 6) has not printed its heading: the last one printed is
            // another check's.
            print((finding.id == begun_ ? "" : heading(finding.id)) + format_finding(finding));
            if (quiet_)  // a rank other than 0 under --mpi: which one, and where, tells the stuck rank from the rest
                std::fprintf(stderr, "%s on host %s: %s: %s (ending the process)\n", running_program_name(),
                             host_name().c_str(), finding.id.c_str(), finding.summary.c_str());
            // In place of a finding of the same id already reported (check 7's SKIP on rank 0, before the
            // wait for the other ranks that ended up here): one verdict per check in the summary and JSON.
            const auto same_id = std::find_if(findings_.begin(), findings_.end(),
                                              [&](const Finding& earlier) { return earlier.id == finding.id; });
            if (same_id != findings_.end())
                *same_id = std::move(finding);
            else
                findings_.push_back(std::move(finding));
            for (Finding& held : held_) {
                print(heading(held.id) + format_finding(held));
                findings_.push_back(std::move(held));
            }
            held_.clear();
        }
        *code = exit_code_locked();  // the code the summary line and the RESULT name
        if (!finished_) {
            try {
                finish_locked();
            } catch (const EnvironmentError& e) {  // the --json file, written before the summary line
                std::fprintf(stderr, "doctor: %s\n", e.what());
                *code = kExitEnvironment;  // as at the end of a run that was not abandoned
            } catch (const std::exception& e) {
                std::fprintf(stderr, "doctor: %s\n", e.what());
            }
        }
    }
    end_process_now(*code);
}

}  // namespace fwi::doctor
