#include "pcie_acs.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>

#include "report.hpp"

namespace fwi::doctor {

namespace {

constexpr size_t kExtendedCapabilitiesStart = 0x100;  // the PCIe extended capabilities' first header
constexpr size_t kConfigSpaceBytes = 0x1000;
constexpr size_t kUnprivilegedConfigBytes = 64;  // what sysfs gives a reader without root
constexpr unsigned kAcsCapabilityId = 0x000d;
constexpr size_t kAcsControlOffset = 6;  // from the ACS capability's header
// ACS Control bits (PCIe base specification, ACS Extended Capability).
constexpr unsigned kRequestRedirect = 1u << 2, kCompletionRedirect = 1u << 3, kEgressControl = 1u << 5;

unsigned read_le(const std::vector<unsigned char>& bytes, size_t offset, int count) {
    unsigned value = 0;
    for (int i = count - 1; i >= 0; --i) value = (value << 8) | bytes[offset + i];
    return value;
}

std::vector<unsigned char> read_bytes(const std::filesystem::path& path) {
    std::ifstream file(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
}

void add_once(std::vector<std::string>& list, const std::string& item) {
    if (std::find(list.begin(), list.end(), item) == list.end()) list.push_back(item);
}

}  // namespace

std::vector<std::string> pci_functions_on_path(const std::string& sysfs_device_path) {
    static const std::regex function_address("[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\\.[0-7]");
    std::vector<std::string> functions;
    for (const auto& part : std::filesystem::path(sysfs_device_path))
        if (std::regex_match(part.string(), function_address)) functions.push_back(part.string());
    return functions;
}

std::vector<std::string> switch_ports_between(const std::vector<std::string>& a, const std::vector<std::string>& b) {
    size_t shared = 0;
    while (shared < a.size() && shared < b.size() && a[shared] == b[shared]) ++shared;
    std::vector<std::string> ports;
    if (shared == 0) return ports;
    for (const auto* path : {&a, &b})
        for (size_t i = shared; i + 1 < path->size(); ++i) ports.push_back((*path)[i]);
    return ports;
}

bool has_extended_config(const std::vector<unsigned char>& config) {
    return config.size() >= kExtendedCapabilitiesStart + 4;
}

std::optional<unsigned> acs_control(const std::vector<unsigned char>& config) {
    if (!has_extended_config(config)) return std::nullopt;
    size_t offset = kExtendedCapabilitiesStart;
    // Each header: the capability's id (16 bits), its version (4) and the next header's offset (12); a
    // chain that loops or points outside the space ends the walk.
    for (int visited = 0; visited < int(kConfigSpaceBytes / 4); ++visited) {
        if (offset + 4 > config.size()) return std::nullopt;
        const unsigned header = read_le(config, offset, 4);
        if (header == 0 || header == 0xffffffffu) return std::nullopt;
        if ((header & 0xffffu) == kAcsCapabilityId) {
            if (offset + kAcsControlOffset + 2 > config.size()) return std::nullopt;
            return read_le(config, offset + kAcsControlOffset, 2);
        }
        const size_t next = (header >> 20) & 0xffcu;
        if (next < kExtendedCapabilitiesStart) return std::nullopt;
        offset = next;
    }
    return std::nullopt;
}

std::string acs_redirect_bits(unsigned control) {
    std::string bits;
    for (const auto& [mask, name] :
         {std::pair{kRequestRedirect, "RR"}, std::pair{kCompletionRedirect, "CR"}, std::pair{kEgressControl, "EC"}})
        if (control & mask) bits += (bits.empty() ? "" : " ") + std::string(name);
    return bits;
}

AcsReading read_acs(const std::string& sysfs_root, const std::vector<PciePair>& pairs) {
    const std::filesystem::path devices = std::filesystem::path(sysfs_root) / "bus" / "pci" / "devices";
    AcsReading reading;
    for (const PciePair& pair : pairs) {
        std::error_code error_first, error_second;
        const auto first = std::filesystem::canonical(devices / pair.first, error_first);
        const auto second = std::filesystem::canonical(devices / pair.second, error_second);
        if (error_first || error_second) {
            ++reading.pairs_without_path;
            continue;
        }
        const std::vector<std::string> ports =
            switch_ports_between(pci_functions_on_path(first.string()), pci_functions_on_path(second.string()));
        for (const std::string& port : ports) add_once(reading.ports, port);
    }
    for (const std::string& port : reading.ports) {
        const std::vector<unsigned char> config = read_bytes(devices / port / "config");
        if (!has_extended_config(config)) {
            reading.unreadable.push_back(port + (config.size() == kUnprivilegedConfigBytes
                                                     ? " (its first 64 bytes only: the rest needs root)"
                                                     : " (no configuration space to read)"));
            continue;
        }
        const std::optional<unsigned> control = acs_control(config);
        const std::string bits = control ? acs_redirect_bits(*control) : "";
        if (!bits.empty()) reading.redirecting.push_back(port + " (" + bits + ")");
    }
    return reading;
}

AcsVerdict acs_verdict(const AcsReading& acs, size_t pairs) {
    AcsVerdict verdict;
    if (pairs > 0 && size_t(acs.pairs_without_path) == pairs) {
        verdict.line = "ACS: not read (the GPUs are not in /sys/bus/pci/devices; a container may hide them)";
        verdict.unread = "ACS (the GPUs are not in /sys/bus/pci/devices)";
        return verdict;
    }
    verdict.line = "ACS: " + std::to_string(pairs) + " GPU pair(s) over PCIe; ";
    if (acs.ports.empty())
        verdict.line += "no PCIe switch port between them in the PCIe tree this system shows";
    else
        verdict.line +=
            std::to_string(acs.ports.size()) + " switch port(s) between them (" + join(acs.ports, ", ") + "): " +
            (acs.redirecting.empty() ? "none turns peer traffic away" : "redirecting: " + join(acs.redirecting, ", "));
    if (!acs.unreadable.empty()) {
        verdict.line += "; not readable: " + join(acs.unreadable, ", ");
        verdict.unread = "ACS on " + std::to_string(acs.unreadable.size()) +
                         " PCIe switch port(s) between GPUs (reading them needs root: run doctor as root)";
    }
    if (acs.pairs_without_path > 0)
        verdict.line += "; " + std::to_string(acs.pairs_without_path) + " pair(s) not found in /sys/bus/pci";
    if (!acs.redirecting.empty()) {
        verdict.problem = "ACS on PCIe switch ports between GPUs sends their peer traffic through the CPU (" +
                          join(acs.redirecting, ", ") + ")";
        verdict.fix =
            "turn ACS off on those ports: in the BIOS (often with IO virtualization / VT-d), or as root until the "
            "next boot with `setpci -s <port> ECAP_ACS+0x6.w=0000`; until then NCCL_P2P_DISABLE=1 keeps NCCL correct";
    }
    return verdict;
}

}  // namespace fwi::doctor
