// PCIe Access Control Services (ACS) on the switch ports between GPUs that talk over PCIe (check 6).
//
// A PCIe switch passes a transfer from one of its ports straight to another, unless ACS on the port says
// otherwise: with P2P Request Redirect (RR), P2P Completion Redirect (CR) or P2P Egress Control (EC) set
// in a port's ACS Control register, peer traffic is sent up to the root complex instead. There it crawls,
// or, where the IOMMU translates, arrives wrong or not at all: the "P2P works but is slow, or hangs" of
// NCCL's troubleshooting guide ("PCI Access Control Services"), which asks for ACS off on bare metal.
// Linux turns these bits on itself in switch ports when the IOMMU is on. A virtual machine sees the
// hypervisor's PCIe tree, not the host's switches, so doctor can read ACS only on bare metal or where the
// host's switches are passed through.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace fwi::doctor {

// The PCI functions on a device's sysfs path, from the root port down to the device itself:
// "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:08.0/0000:03:00.0" ->
// {"0000:00:01.0", "0000:01:00.0", "0000:02:08.0", "0000:03:00.0"}.
std::vector<std::string> pci_functions_on_path(const std::string& sysfs_device_path);

// The switch ports a peer transfer between two devices passes (their pci_functions_on_path): those below
// the deepest function both paths hold (the switch they share), the devices themselves left out. Empty
// when the paths share no function: the devices hang under different root ports, and their traffic
// crosses the root complex whatever ACS says.
std::vector<std::string> switch_ports_between(const std::vector<std::string>& a, const std::vector<std::string>& b);

// The ACS Control register (16 bits) from a function's configuration space, as sysfs's `config` file gives
// it; nullopt when its extended capabilities (from byte 256) hold no ACS capability.
std::optional<unsigned> acs_control(const std::vector<unsigned char>& config);
// Whether `config` reaches the extended capabilities: without root, sysfs gives only the first 64 bytes.
bool has_extended_config(const std::vector<unsigned char>& config);

// The names of the bits of an ACS Control value that turn peer traffic away: "RR CR EC", "" when none.
std::string acs_redirect_bits(unsigned control);

// Two GPUs that reach each other over PCIe only, by PCI address ("0000:03:00.0", lower case, as sysfs).
struct PciePair {
    std::string first, second;
};

// What the switch ports between the pairs say, read under `sysfs_root` ("/sys", or a tree made by a test):
// each port once.
struct AcsReading {
    std::vector<std::string> ports;        // every switch port between a pair
    std::vector<std::string> redirecting;  // "0000:02:08.0 (RR CR)": ports that turn peer traffic away
    std::vector<std::string> unreadable;   // "0000:02:18.0 (why)": ports whose capabilities could not be read
    int pairs_without_path = 0;            // pairs with a GPU missing from sysfs (a container may hide it)
};
AcsReading read_acs(const std::string& sysfs_root, const std::vector<PciePair>& pairs);

// Check 6's line about a reading of `pairs` GPU pairs, and its problem and fix ("" when none turns traffic away);
// `unread`: what of ACS it could not judge ("" when every port between the pairs was read), for the summary.
struct AcsVerdict {
    std::string line, problem, fix, unread;
};
AcsVerdict acs_verdict(const AcsReading& acs, size_t pairs);

}  // namespace fwi::doctor
