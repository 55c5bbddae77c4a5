// Reading NCCL's own log: which transport each pair of ranks uses, and NCCL's warnings. doctor points
// NCCL_DEBUG=INFO and NCCL_DEBUG_FILE at a file of its own for its NCCL run (only when the user set
// neither) and reads lines such as
//   host:123:456 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read
//   host:123:456 [1] NCCL INFO Channel 01/0 : 1[1] -> 0[0] [send] via NET/IB/0/GDRDMA
//   host:123:456 [0] NCCL INFO NCCL_P2P_DISABLE set by environment to 1
// The format is NCCL's, not an interface: when nothing parses, doctor says how to see it by hand.
#pragma once

#include <istream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "report.hpp"

namespace fwi::doctor {

struct NcclLog {
    // (from rank, to rank) -> transports seen on that connection ("P2P/CUMEM/read", "SHM/direct/direct")
    std::map<std::pair<int, int>, std::set<std::string>> transports;
    std::vector<std::string> warnings;  // the text after "NCCL WARN"
    // The settings NCCL says it read ("NCCL INFO NCCL_P2P_DISABLE set by environment to 1"), name -> value:
    // from the environment or from a config file (NCCL_CONF_FILE, ~/.nccl.conf, /etc/nccl.conf), which
    // NCCL loads into its environment first.
    std::map<std::string, std::string> settings;
    // Its last kLastInfoLines info lines from the GPU's bracket on ("[1] NCCL INFO Bootstrap ..."): where NCCL
    // got to, for a failure.
    static constexpr size_t kLastInfoLines = 8;
    std::vector<std::string> last_info;
};

NcclLog parse_nccl_log(std::istream& log);

// "P2P/CUMEM/read" -> "P2P": the transport's family.
std::string transport_family(const std::string& transport);
// What a matrix cell shows of a transport: its family, and for the network which one ("NET/IB/0/GDRDMA" ->
// "NET/IB", "NET/Socket/0" -> "NET/Socket"), as across hosts that is what sets the speed.
std::string transport_cell(const std::string& transport);
// A transport without the NIC's number, the same for every NIC of a pair ("NET/IB/0/GDRDMA" -> "NET/IB/GDRDMA",
// "NET/Socket/1" -> "NET/Socket"); other transports as they are. Check 7 sends these between the ranks.
std::string transport_without_nic(const std::string& transport);

// NCCL's connections as a matrix (row = sender, column = receiver, cell = the transports' families),
// or a line saying how to see them when the log was not captured or did not parse.
// The rows and columns are named `label` (format_matrix): GPU for the GPUs of one process, rank for MPI ranks.
std::vector<std::string> transport_lines(const NcclLog& log, int ranks, bool captured,
                                         const std::string& label = "GPU");
JsonObject transport_json(const NcclLog& log, int ranks);
// Up to `most` of NCCL's warnings, for a failure's details.
std::vector<std::string> warning_lines(const NcclLog& log, size_t most = 5);
// A failure's details from the log: its warnings, then its last info lines (where NCCL stopped: an init that
// timed out shows the step it waited in).
std::vector<std::string> failure_lines(const NcclLog& log);

// Sets NCCL_DEBUG=INFO and NCCL_DEBUG_FILE to a file in a new private folder under the temporary
// folder ($TMPDIR, else /tmp), unless the user set either (their setting wins; then nothing is
// captured). While it captures, NCCL_DEBUG_SUBSYS is set to the subsystems whose lines are read here
// (an NCCL_DEBUG_SUBSYS of the user's, which without NCCL_DEBUG does nothing, is set aside and put back).
// Must run before the first NCCL call of the process.
class NcclLogCapture {
public:
    static constexpr const char* captured_subsystems = "INIT,ENV";

    NcclLogCapture();
    // Removes the file and its folder; so do end_process_now and a signal that ends the process (SIGINT,
    // SIGTERM, SIGHUP, where nothing else handles it) while it lives. One capture at a time.
    ~NcclLogCapture();
    NcclLogCapture(const NcclLogCapture&) = delete;
    NcclLogCapture& operator=(const NcclLogCapture&) = delete;

    bool capturing() const { return !path_.empty(); }
    NcclLog read() const;

private:
    std::string folder_, path_;
    std::optional<std::string> user_subsystems_;  // NCCL_DEBUG_SUBSYS as it was, where set
};

}  // namespace fwi::doctor
