// doctor's findings: one verdict per check (PASS / WARN / FAIL / SKIP) with a one-line explanation and
// what to try next, the lines under it (tables, matrices), the same data as JSON, and the exit code they
// add up to. The Report prints each finding as soon as its check ends, so a run that is cut short still
// shows everything found before.
#pragma once

#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "output.hpp"
#include "timing.hpp"

namespace fwi::doctor {

enum class Status { pass, warn, fail, skip };

const char* status_name(Status status);  // "PASS", "WARN", "FAIL", "SKIP"

struct Finding {
    std::string id;  // the check's key: "devices", "topology", "p2p", ...
    Status status = Status::pass;
    std::string summary;               // one line: what was found
    std::string next;                  // one line: what to try next (empty when nothing is to be done)
    std::vector<std::string> details;  // lines printed under the summary
    JsonObject facts;                  // the figures behind it, for --json
};

// The checks in the order they run, with their titles; ids are the keys of --json and, but for the two
// that always run, of --checks (selectable_checks).
struct CheckInfo {
    const char* id;
    const char* title;
};
const std::vector<CheckInfo>& all_checks();
const CheckInfo& check_info(const std::string& id);  // throws std::invalid_argument for an unknown id
int check_number(const std::string& id);             // 1-based position in all_checks()
// The ids --checks takes: every check but devices and topology, which always run.
std::vector<std::string> selectable_checks();

Finding skipped(const std::string& id, const std::string& reason);

// The text printed for a finding: "  PASS  summary", then "        try:  next" and the details.
std::string format_finding(const Finding& finding);

// A square table with one row and one column per GPU, like `nvidia-smi topo -m`: `corner` heads the row
// labels, cell(row, column) fills the body, every column `width` characters wide or, where a text is
// longer, one more than the longest. The rows and columns are
// named `label` and their number: GPU0, GPU1, ... (rank0, ... for MPI ranks).
std::vector<std::string> format_matrix(int n, const std::string& corner, int width,
                                       const std::function<std::string(int, int)>& cell,
                                       const std::string& label = "GPU");

// The same square table for --json: {"0": {"1": cell(0, 1), ...}, ...}; the diagonal only when asked.
template <typename Cell>
JsonObject matrix_json(int n, bool with_diagonal, const Cell& cell) {
    JsonObject rows;
    for (int row = 0; row < n; ++row) {
        JsonObject columns;
        for (int column = 0; column < n; ++column)
            if (with_diagonal || row != column) columns.add(std::to_string(column), cell(row, column));
        rows.add(std::to_string(row), columns);
    }
    return rows;
}

// The findings of one run. Thread-safe: the watchdog may end the run from its own thread.
class Report {
public:
    // quiet: print nothing (every MPI rank but 0); json_path: where finish() writes the JSON ("" for none).
    Report(bool quiet, std::string json_path, std::string mode);

    // Prints the check's heading ("[3/7] P2P works ...").
    void begin(const std::string& id);
    // Prints the finding and keeps it.
    void add(Finding finding);
    // A finding made ahead of its turn (check 6 reads only the host): add() prints it in its place as any
    // other; where the run is abandoned before then, abandon() prints it after the abandoned check's.
    void hold(Finding finding);
    // No GPU visible: the run ends with exit code 3 (environment) whatever the findings say.
    void set_no_gpu();
    void set_fact(const std::string& key, const std::string& value);
    void set_fact(const std::string& key, int value);

    int exit_code() const;

    // Writes the JSON file, prints the summary line and `RESULT {json}`, returns the exit code. A JSON file
    // that cannot be written throws EnvironmentError (exit 3) before either line is printed.
    int finish();
    // Adds `finding` (a FAIL) and the findings held, finishes, and ends the process at once (std::_Exit) with the exit
    // code the summary names (1, or 3 with no GPU): work stuck on a GPU cannot be cancelled, and a normal exit could
    // wait on it forever. Finishing gets 5 s; past them the process ends without the RESULT line.
    [[noreturn]] void abandon(Finding finding);

private:
    int finish_locked();
    std::string heading(const std::string& id) const;
    std::string summary_line_locked() const;
    JsonObject json_locked() const;
    int exit_code_locked() const;
    void print(const std::string& text) const;

    mutable std::mutex mutex_;
    bool quiet_;
    std::string json_path_;
    std::string mode_;
    bool no_gpu_ = false;
    bool finished_ = false;
    std::vector<Finding> findings_;
    std::vector<Finding> held_;  // made ahead of their turn, not yet added
    std::string begun_;          // the check whose heading was printed last
    JsonObject facts_;
    HostTimer timer_;
};

}  // namespace fwi::doctor
