// What doctor reads from the host without a GPU: the environment variables in effect, the test-only
// fault injection switch, the driver's traces in /proc and /dev, and the host check (check 6: /dev/shm,
// limits, IOMMU hints from the kernel command line, ACS on the PCIe switch ports between GPUs).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "pcie_acs.hpp"
#include "report.hpp"

namespace fwi::doctor {

// Test-only fault injection, from the environment variable FWI_DOCTOR_INJECT, a comma list of:
//   corrupt-peer      the P2P check's first pair sees half of its peer-read data zeroed
//   hang-peer-kernel  the P2P check's first peer-read kernel spins forever on a flag that is never set
//   fault-peer-kernel the P2P check's first peer-read kernel reads an address that maps to nothing, as a peer
//                     read that the IOMMU refuses does: an error that CUDA keeps for the rest of the process
//   hang-nccl         after a first correct allreduce, GPU 0 (rank 0 under --mpi) leaves the next one
//                     out, so the other GPUs wait for it (needs 2 or more GPUs)
//   fail-rank1        under --mpi, rank 1 fails check 7 before its first collective, so rank 0 waits for
//                     it (needs no GPU)
//   busy-gpu-rank1    under --mpi, rank 1 cannot take the GPU chosen for it, as where another process
//                     holds it in exclusive-process mode, so the other ranks go on without it (needs a GPU)
//   nccl-no-memory    check 5's buffers are refused as if the GPUs had no memory for them, once its
//                     communicators are up
// so that tests can prove doctor reports FAIL (or, for the memory, a WARN naming --nccl-mib) and ends
// within its time limit instead of hanging.
struct Injection {
    bool corrupt_peer = false;
    bool hang_peer_kernel = false;
    bool fault_peer_kernel = false;
    bool hang_nccl = false;
    bool fail_rank1 = false;
    bool busy_gpu_rank1 = false;
    bool nccl_no_memory = false;
    std::string text;  // the variable's value, "" when unset
};
Injection parse_injection(const std::string& text);  // throws UsageError naming FWI_DOCTOR_INJECT
Injection injection_from_environment();

using Variables = std::vector<std::pair<std::string, std::string>>;

// The variables that steer CUDA, NCCL and Open MPI (CUDA_*, NCCL_*, OMPI_*), sorted by name, from
// "NAME=value" entries (as in environ).
Variables relevant_variables(const std::vector<std::string>& entries);
Variables relevant_variables_in_effect();
// mpirun sets dozens of OMPI_* variables for its own use; the text output shows only those a user sets
// to change behaviour (the JSON has them all).
bool worth_showing(const std::string& name);
std::string value_of(const Variables& variables, const std::string& name);  // "" when absent
bool is_set(const Variables& variables, const std::string& name);

// Check 1's lines about the environment: CUDA_VISIBLE_DEVICES (also when unset), then every variable
// worth showing; and all of them for --json.
std::vector<std::string> environment_lines(const Variables& variables);
JsonObject environment_json(const Variables& variables);

// Settings that change what NCCL does, one line each ("NCCL_P2P_DISABLE=1: ..."); `slows` marks those that
// take a faster path away (a WARN in the NCCL checks), judged from the value alone: for NCCL_P2P_LEVEL a
// level below NCCL's default, which check 5 then weighs against the machine's links (p2p_level_limits_pairs).
struct NcclSettingNote {
    std::string name;     // "NCCL_P2P_DISABLE"
    std::string setting;  // "NCCL_P2P_DISABLE=1"
    std::string meaning;
    bool slows = false;
    std::string text() const { return setting + ": " + meaning; }
};
std::vector<NcclSettingNote> nccl_setting_notes(const Variables& variables);

// How NCCL reads NCCL_P2P_DISABLE and NCCL_SHM_DISABLE: set when the value is the number 1 ("0", "2" and
// words leave the transport on).
bool nccl_disable_set(const std::string& value);
// Whether an NCCL_P2P_LEVEL value allows P2P between fewer GPU pairs than NCCL does by default, which is
// PXB (pairs whose PCIe path does not cross a CPU): LOC (no pair), NVL, NVB, C2C (NVLink only), PIX (one
// PCIe switch), and the old numbers 0 (LOC) and 1 (PIX). PXB or 2 is the default; PHB, SYS, 3 to 5 and
// NCCL's other path names allow as much or more. (On AMD CPUs with at most 2 GPUs NCCL's default is SYS,
// where PXB and PHB take P2P away too; doctor does not tell those machines apart.)
bool p2p_level_below_default(const std::string& value);
// An NCCL_P2P_LEVEL value by name: NCCL's old numbers as the names it maps them to (0 LOC, 1 PIX, 2 PXB,
// 3 PHB, 4 and above SYS), other values as they are.
std::string p2p_level_name(const std::string& value);

// Traces of the NVIDIA driver that need no CUDA call: for the "no GPU" diagnosis.
struct DriverTraces {
    std::string kernel_module;  // first line of /proc/driver/nvidia/version, "" when absent
    bool control_node = false;  // /dev/nvidiactl exists
    int gpu_nodes = 0;          // /dev/nvidia0, /dev/nvidia1, ...
    bool wsl_gpu = false;       // /dev/dxg exists: WSL2, whose GPUs have no /dev/nvidia* nodes
    std::string nvidia_smi;     // its path on PATH, "" when not found
};
DriverTraces read_driver_traces();

// What doctor could read when CUDA shows no GPU, and the diagnosis built from it (check 1's FAIL).
struct NoGpuFacts {
    std::string cuda_error;    // cudaGetDeviceCount's error name, e.g. "cudaErrorNoDevice"
    int driver_version = 0;    // cudaDriverGetVersion: 0 when libcuda.so.1 was not found
    int runtime_version = 0;   // cudaRuntimeGetVersion
    int nvml_gpus = -1;        // GPUs NVML sees (ignores CUDA_VISIBLE_DEVICES); -1 when NVML is not available
    int gpus_in_mig_mode = 0;  // of those, the ones in MIG mode: CUDA shows their instances, not them
    bool visible_devices_set = false;
    std::string visible_devices;  // CUDA_VISIBLE_DEVICES
    DriverTraces traces;
};
Finding diagnose_no_gpu(const NoGpuFacts& facts);

struct IommuHints {
    std::vector<std::string> options;  // the IOMMU options found on the kernel command line
    bool enabled_by_option = false;    // intel_iommu=on or amd_iommu=on / force_enable
    bool disabled_by_option = false;   // intel_iommu=off, amd_iommu=off or iommu=off
    bool passthrough = false;          // iommu=pt or iommu.passthrough=1
};
IommuHints parse_iommu_hints(const std::string& kernel_command_line);

// Whether the IOMMU translates device addresses. From the kernel's own word where it gives one: the type
// of each IOMMU group (/sys/kernel/iommu_groups/N/type, Linux 5.11 and later: "identity" is passthrough,
// "DMA" and "DMA-FQ" translate; translating when any group does), which also covers a passthrough default
// built into the kernel. Without those files, from the command line's options and the group count.
bool iommu_translates(const std::vector<std::string>& group_types, const IommuHints& hints, int groups);

// The types of the IOMMU groups that hold the GPUs of `pairs`, each GPU once, read under `sysfs_root` ("/sys",
// or a tree made by a test: bus/pci/devices/<GPU>/iommu_group/type): the translation that their peer traffic
// meets, whatever other devices' groups do. Empty where sysfs does not say for some GPU (no IOMMU group, a
// container that hides the GPU, Linux before 5.11): then only the whole machine's groups can judge.
std::vector<std::string> gpu_iommu_group_types(const std::string& sysfs_root, const std::vector<PciePair>& pairs);

// What is wrong with the stack limit for NCCL `nccl_version` ("2.28.3"), "" when nothing. Before NCCL
// 2.28, glibc sizes NCCL's threads' stacks from the limit: under 8 MiB (`limit_bytes`) they get less, and
// unlimited gives them only 2 MiB, which its topology search can overflow (NCCL's troubleshooting guide,
// "Stack size"). From 2.28 NCCL raises its threads' stacks to 8 MiB itself, unless
// NCCL_SET_CPU_STACK_SIZE is 0 (`set_cpu_stack_size`: that variable's value, "" when unset; see
// nccl_stack_sizing_turned_off).
bool nccl_stack_sizing_turned_off(const std::string& set_cpu_stack_size);  // as NCCL reads the value
std::string stack_limit_problem(bool unlimited, unsigned long long limit_bytes, const std::string& nccl_version,
                                const std::string& set_cpu_stack_size);

// Whether this host has InfiniBand (or RoCE) devices: /sys/class/infiniband lists one.
bool has_infiniband_devices();

// What is wrong with the locked-memory limit (`limit` as shown, e.g. "8 MiB"), "" when nothing: any limit
// where the host has InfiniBand (or RoCE) devices, as NCCL's transport for them registers (locks) its
// buffers; NCCL's troubleshooting guide asks containers for --ulimit memlock=-1.
std::string locked_memory_problem(bool infiniband_devices, bool unlimited, const std::string& limit);

// A problem check 6 finds on the host, and what to do about it (`what` "" for none).
struct HostProblem {
    std::string what;
    std::string fix;
};

// What is wrong with /dev/shm (`total_bytes` and `free_bytes` as statvfs gives them; both 0 where it is
// missing). NCCL's SHM transport and MPI's shared-memory transport keep their buffers there: Docker gives
// a container 64 MiB unless told otherwise, and the segments of jobs that were killed stay behind until
// removed, filling it (NCCL then fails to connect, or hangs).
HostProblem shared_memory_problem(double total_bytes, double free_bytes);

// What check 6 knows of the GPU pairs with peer access (checks 1 and 2 find them), where IOMMU translation
// and ACS on the switch ports between them matter when they talk over PCIe (pcie_acs.hpp).
struct PeerPairs {
    bool checked = false;        // the pairs are known: check 2 looked at them (not under --mpi), or no GPU is visible
    bool links_known = false;    // NVML told NVLink from PCIe
    std::vector<PciePair> pcie;  // with peer access and no NVLink; every pair with peer access if !links_known
    int without_access = 0;      // pairs with peer access neither way and no NVLink (known or not)
};
// Check 6. The IOMMU hint counts a pair whose link is unknown as PCIe; ACS is read only for pairs known to
// talk over PCIe (an NVLink machine's switch ports may well redirect, harmlessly).
Finding check_host(const PeerPairs& pairs);
// Check 6's shared memory and limits alone, where the GPU pairs (and so IOMMU and ACS) are not known: what
// check 7 runs on the hosts other than rank 0's.
Finding check_host_memory_and_limits();

}  // namespace fwi::doctor
