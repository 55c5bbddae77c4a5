#include "nccl_log.hpp"

#include <unistd.h>

#include <cctype>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "errors.hpp"
#include "nccl_comm.hpp"
#include "run_env.hpp"

namespace fwi::doctor {

namespace {

// "12[3]" -> 12; -1 when the text is not a rank followed by a bracket.
int rank_of(const std::string& text) {
    const size_t bracket = text.find('[');
    if (bracket == 0 || bracket == std::string::npos) return -1;
    for (size_t i = 0; i < bracket; ++i)
        if (text[i] < '0' || text[i] > '9') return -1;
    return std::stoi(text.substr(0, bracket));
}

}  // namespace

NcclLog parse_nccl_log(std::istream& log) {
    NcclLog result;
    for (std::string line; std::getline(log, line);) {
        if (const size_t info = line.find(" NCCL INFO "); info != std::string::npos) {
            // From the GPU's bracket on ("[1] NCCL INFO ..."): one process's communicators share the log.
            const size_t bracket = line.rfind(" [", info);
            if (result.last_info.size() == NcclLog::kLastInfoLines) result.last_info.erase(result.last_info.begin());
            result.last_info.push_back(line.substr(bracket == std::string::npos ? info + 1 : bracket + 1));
        }
        if (const size_t warn = line.find("NCCL WARN "); warn != std::string::npos) {
            result.warnings.push_back(line.substr(warn + 10));
            continue;
        }
        if (const size_t set = line.find(" set by environment to "); set != std::string::npos) {
            // "... NCCL INFO NCCL_SHM_DISABLE set by environment to 1." (some versions end with a period)
            const size_t name = line.rfind(" NCCL_", set);
            std::string value = line.substr(set + 23);
            while (!value.empty() && (value.back() == '.' || value.back() == ' ' || value.back() == '\r'))
                value.pop_back();
            if (name != std::string::npos && line.find("NCCL INFO ") != std::string::npos)
                result.settings[line.substr(name + 1, set - name - 1)] = value;
            continue;
        }
        if (line.find("NCCL INFO Channel ") == std::string::npos) continue;
        const size_t colon = line.find(" : ");
        const size_t via = line.find(" via ");
        if (colon == std::string::npos || via == std::string::npos || via < colon) continue;
        // "0[0] -> 1[1]" or "0[0] -> 1[1] [send]", then the transport up to the next blank
        std::istringstream words(line.substr(colon + 3, via - colon - 3));
        std::string from, arrow, to;
        words >> from >> arrow >> to;
        std::istringstream after_via(line.substr(via + 5));
        std::string transport;
        after_via >> transport;
        const int from_rank = rank_of(from), to_rank = rank_of(to);
        if (arrow != "->" || from_rank < 0 || to_rank < 0 || transport.empty()) continue;
        result.transports[{from_rank, to_rank}].insert(transport);
    }
    return result;
}

std::string transport_family(const std::string& transport) { return transport.substr(0, transport.find('/')); }

std::string transport_cell(const std::string& transport) {
    if (transport_family(transport) != "NET") return transport_family(transport);
    return transport.substr(0, transport.find('/', 4));  // "NET/IB/0/GDRDMA" -> "NET/IB"
}

std::string transport_without_nic(const std::string& transport) {
    if (transport_family(transport) != "NET") return transport;
    const size_t kind_end = transport.find('/', 4);  // after "NET/IB"
    if (kind_end == std::string::npos || kind_end + 1 >= transport.size() ||
        !std::isdigit(static_cast<unsigned char>(transport[kind_end + 1])))
        return transport;
    const size_t nic_end = transport.find('/', kind_end + 1);  // "0" or "0(1)"
    return transport.substr(0, kind_end) + (nic_end == std::string::npos ? "" : transport.substr(nic_end));
}

std::vector<std::string> transport_lines(const NcclLog& log, int ranks, bool captured, const std::string& label) {
    if (log.transports.empty())
        return {std::string(captured ? "NCCL's log named no connections"
                                     : "NCCL_DEBUG was set by you, so doctor did not capture NCCL's log") +
                "; " + nccl_transport_hint()};
    std::vector<std::string> lines{
        "NCCL's connections (from its log; row = sending rank, column = receiving rank; P2P = NVLink or PCIe peer "
        "copies, SHM = host memory, NET = network: IB = InfiniBand or RoCE, Socket = TCP):"};
    for (const auto& line : format_matrix(
             ranks, "", 9,
             [&](int from, int to) {
                 if (from == to) return std::string("X");
                 const auto found = log.transports.find({from, to});
                 if (found == log.transports.end()) return std::string("-");
                 std::set<std::string> families;
                 for (const auto& transport : found->second) families.insert(transport_cell(transport));
                 std::string cell;
                 for (const auto& family : families) cell += (cell.empty() ? "" : "+") + family;
                 return cell;
             },
             label))
        lines.push_back(line);
    return lines;
}

JsonObject transport_json(const NcclLog& log, int ranks) {
    return matrix_json(ranks, false, [&](int from, int to) {
        const auto found = log.transports.find({from, to});
        std::string text;
        if (found != log.transports.end())
            for (const auto& transport : found->second) text += (text.empty() ? "" : " ") + transport;
        return text;
    });
}

std::vector<std::string> warning_lines(const NcclLog& log, size_t most) {
    std::vector<std::string> lines;
    for (size_t i = 0; i < log.warnings.size() && i < most; ++i) lines.push_back("NCCL WARN " + log.warnings[i]);
    return lines;
}

std::vector<std::string> failure_lines(const NcclLog& log) {
    std::vector<std::string> lines = warning_lines(log);
    if (log.last_info.empty()) return lines;
    lines.push_back("NCCL's last log lines (where it got to; [n] is the GPU):");
    for (const std::string& info : log.last_info) lines.push_back("  " + info);
    return lines;
}

namespace {

// The capture's folder and log as plain characters, for what ends the process without its destructor: a
// signal that ends it (Ctrl-C, mpirun's SIGTERM) and end_process_now (a hung check abandoned, a wait past its
// limit). Both may only unlink and rmdir, which are async-signal-safe. Empty: nothing to remove.
char g_captured_folder[4096];
char g_captured_log[4096];
constexpr int kEndingSignals[] = {SIGINT, SIGTERM, SIGHUP};
struct sigaction g_previous_actions[std::size(kEndingSignals)];
bool g_handled[std::size(kEndingSignals)];

void remove_captured_log() {
    if (g_captured_log[0]) ::unlink(g_captured_log);
    if (g_captured_folder[0]) ::rmdir(g_captured_folder);
}

void remove_captured_log_and_end(int signal_number) {
    remove_captured_log();
    ::signal(signal_number, SIG_DFL);  // and end as the signal would have ended the process
    ::raise(signal_number);
}

// Removes the log when the process ends without the destructor; a signal whose handling someone else set
// (MPI's, the user's) is left to it.
void remove_at_sudden_end(const std::string& folder, const std::string& log) {
    if (log.size() >= sizeof g_captured_log) return;  // the destructor alone removes it
    std::strcpy(g_captured_folder, folder.c_str());
    std::strcpy(g_captured_log, log.c_str());
    set_sudden_end_cleanup(remove_captured_log);
    struct sigaction action {};
    action.sa_handler = remove_captured_log_and_end;
    sigemptyset(&action.sa_mask);
    for (size_t i = 0; i < std::size(kEndingSignals); ++i) {
        g_handled[i] = ::sigaction(kEndingSignals[i], nullptr, &g_previous_actions[i]) == 0 &&
                       g_previous_actions[i].sa_handler == SIG_DFL &&
                       ::sigaction(kEndingSignals[i], &action, nullptr) == 0;
    }
}

void stop_removing_at_sudden_end() {
    for (size_t i = 0; i < std::size(kEndingSignals); ++i)
        if (g_handled[i]) ::sigaction(kEndingSignals[i], &g_previous_actions[i], nullptr);
    set_sudden_end_cleanup(nullptr);
    g_captured_log[0] = g_captured_folder[0] = '\0';
}

}  // namespace

NcclLogCapture::NcclLogCapture() {
    // The user's own log settings win; an empty one is no setting (as prepare_nccl reads it).
    const auto set = [](const char* name) {
        const char* value = std::getenv(name);
        return value && *value;
    };
    if (set("NCCL_DEBUG") || set("NCCL_DEBUG_FILE")) return;
    // In a folder of this process's own (mkdtemp: mode 0700, a new name), not at a name in /tmp that
    // another user could take first with a link or a FIFO for NCCL to write through or block on. NCCL
    // expands %h and %p in NCCL_DEBUG_FILE, so a TMPDIR with a % in it would send the log elsewhere: /tmp then.
    std::error_code error;
    std::string folder = (std::filesystem::temp_directory_path(error) / "fwi-doctor-XXXXXX").string();
    if (error || folder.find('%') != std::string::npos) folder = "/tmp/fwi-doctor-XXXXXX";
    if (!mkdtemp(folder.data())) return;  // no log then: the checks run without transport names
    folder_ = folder;
    path_ = folder_ + "/nccl.log";
    remove_at_sudden_end(folder_, path_);
    set_environment_variable("NCCL_DEBUG", "INFO");
    set_environment_variable("NCCL_DEBUG_FILE", path_.c_str());
    if (const char* subsystems = std::getenv("NCCL_DEBUG_SUBSYS")) user_subsystems_ = subsystems;
    // Set even where the user has none: NCCL reads an NCCL_DEBUG_SUBSYS from its files (NCCL_CONF_FILE,
    // ~/.nccl.conf, /etc/nccl.conf) where the environment has none, and one there could filter out what is
    // read here. INIT names the connections, ENV the settings NCCL took from the environment; warnings
    // are written whatever the subsystems.
    set_environment_variable("NCCL_DEBUG_SUBSYS", captured_subsystems);
}

NcclLogCapture::~NcclLogCapture() {
    if (!capturing()) return;
    stop_removing_at_sudden_end();
    std::error_code ignored;
    std::filesystem::remove_all(folder_, ignored);
    unset_environment_variable("NCCL_DEBUG");
    unset_environment_variable("NCCL_DEBUG_FILE");
    if (user_subsystems_)
        set_environment_variable("NCCL_DEBUG_SUBSYS", user_subsystems_->c_str());
    else
        unset_environment_variable("NCCL_DEBUG_SUBSYS");
}

NcclLog NcclLogCapture::read() const {
    if (!capturing()) return {};
    std::ifstream file(path_);
    return parse_nccl_log(file);
}

}  // namespace fwi::doctor
