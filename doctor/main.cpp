// doctor: diagnoses a machine's multi-GPU setup in one command, and never hangs.
//
// Purpose: the first thing to run when a multi-GPU job hangs or crawls. Seven checks, each with its own
// time limit, each ending in PASS / WARN / FAIL / SKIP with a one-line explanation and what to try next:
//   1 driver, runtime and devices (the other processes on them, and the CUDA_* / NCCL_* / OMPI_* variables
//     in effect)
//   2 topology: peer access, P2P attributes and NVLink / PCIe links of every pair (like nvidia-smi topo -m)
//   3 P2P works: peer copies and a kernel reading peer memory, the data verified
//   4 P2P bandwidth and latency matrices, one way and both ways, P2P on and off
//   5 NCCL allreduce over all GPUs of this process (every wait with a deadline, abort on timeout), timed at
//     1, 32 and 256 MiB as nccl-tests does and compared with what the links carry (checks 2 and 4)
//   6 host: /dev/shm, limits, IOMMU hints, ACS on the PCIe switch ports between GPUs
//   7 under mpirun with --mpi: each rank's GPU, two ranks on one GPU, CUDA-aware MPI, NCCL over MPI
// What you learn: what "P2P supported" does and does not promise, how to read a bandwidth matrix, and
// how to wait on a GPU or a communicator without hanging: poll with a deadline, abort what can be
// aborted (NCCL), and end the process where nothing can be (a hung kernel).
// What you should see: a verdict per check and a summary line with the total time; exit code 0 when
// nothing failed, 1 when something did, 2 for a bad command line, 3 when no GPU is visible (the driver
// facts are still printed) or the --json file cannot be written at the end (a path that cannot be written
// at all is refused at the start: exit 2).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include <unistd.h>

#include "cli.hpp"
#include "errors.hpp"
#include "gpu_checks.hpp"
#include "host.hpp"
#include "launch_env.hpp"
#include "mpi_check.hpp"
#include "mpi_checks.hpp"
#include "mpi_env.hpp"
#include "nccl_verdict.hpp"
#include "output.hpp"
#include "report.hpp"
#include "run_env.hpp"
#include "watchdog.hpp"

using namespace fwi;
using namespace fwi::doctor;

namespace {

struct Options {
    double timeout_s = 30.0;
    int bandwidth_mib = 64;
    int nccl_mib = 256;
    bool cross_check = false;
    std::string checks = "all";
    bool mpi = false;
    std::string json_path;
};

std::vector<std::string> selected_checks(const std::string& list) {
    if (list == "all") return selectable_checks();
    return split_choice_list("--checks", list, selectable_checks(), "check", "all");
}

// Whether a check runs in this mode, when selected: check 7 only with --mpi, the single-process checks 3 to 5
// only without it, check 6 (host) in both (with --mpi on rank 0).
bool runs_in_mode(const std::string& id, bool mpi) {
    if (id == "mpi") return mpi;
    return id == "host" || !mpi;
}

bool parse_options(int argc, char** argv, Options& options) {
    ArgParser parser(
        "doctor",
        "Diagnoses this machine's multi-GPU setup: devices, topology, P2P (verified, bandwidth, latency), "
        "NCCL, host settings and, under mpirun with --mpi, the MPI ranks. Every check has a time limit; "
        "exit 0 nothing failed, 1 something failed, 2 bad command line (a --json path that cannot be written is "
        "refused at the start), 3 no GPU visible or the --json file could not be written at the end.");
    parser.add_double("--timeout", &options.timeout_s, 1, 3600,
                      "seconds each check may take before it is reported as FAIL (hung)");
    parser.add_int("--bandwidth-mib", &options.bandwidth_mib, 1, 4096, "MiB per copy in the bandwidth matrices");
    parser.add_int("--nccl-mib", &options.nccl_mib, 1, 4096,
                   "largest NCCL allreduce, MiB per GPU: check 5 times 1, 32 and this many MiB (those up to it); check "
                   "7 allreduces 32 MiB, or this when smaller");
    parser.add_switch("--cross-check-bandwidth", &options.cross_check,
                      "also time 10 back-to-back 256 MiB copies per pair and compare with the matrix");
    parser.add_string("--checks", &options.checks,
                      "all, or a comma list of p2p, bandwidth, nccl, host, mpi (devices and topology always run)");
    parser.add_switch("--mpi", &options.mpi, "run under mpirun: the MPI checks (7) on every rank");
    parser.add_string("--json", &options.json_path, "also write the findings as JSON to this file");
    // Which checks run: those selected that run in this mode.
    const auto runs = [&options](const std::string& id) {
        const std::vector<std::string> selected = selected_checks(options.checks);
        return std::find(selected.begin(), selected.end(), id) != selected.end() && runs_in_mode(id, options.mpi);
    };
    parser.add_used_only(
        {"--bandwidth-mib", "--cross-check-bandwidth"}, [runs] { return runs("bandwidth"); },
        "when check 4 (bandwidth) runs: selected, without --mpi");
    parser.add_used_only(
        {"--nccl-mib"}, [runs] { return runs("nccl") || runs("mpi"); },
        "when check 5 (nccl, without --mpi) or check 7 (mpi, with --mpi) runs");
    if (!parser.parse(argc, argv)) return false;
    // mpirun without --mpi starts a whole doctor per rank: each would run every check at once on the same GPUs,
    // and their timings would be each other's.
    if (!options.mpi)
        refuse_launch_as_several_ranks(
            "add --mpi for the MPI checks (mpirun -np <GPUs> doctor --mpi), or run doctor without mpirun");
    // A check named in --checks that this mode never runs is refused, as a flag the run would ignore is
    // (`--mpi --checks p2p` ran none of what it asked for). "all" names none: it is what the mode runs.
    if (options.checks != "all")
        for (const std::string& id : selected_checks(options.checks))
            if (!runs_in_mode(id, options.mpi))
                throw UsageError(
                    "--checks: " + id +
                    (options.mpi ? " runs only without --mpi (a single-process check: run doctor without mpirun for it)"
                                 : " runs only with --mpi (mpirun -np <GPUs> doctor --mpi)"));
    // Refused now, not after every check has run; only rank 0 writes it, so only rank 0's view counts.
    if (!options.mpi || world_rank() == 0) check_writable(options.json_path, "--json");
    return true;
}

class Doctor {
public:
    Doctor(const Options& options, int rank)
        : options_(options),
          selected_(selected_checks(options.checks)),
          injection_(injection_from_environment()),
          variables_(relevant_variables_in_effect()),
          report_(rank != 0, options.json_path, options.mpi ? "mpi" : "single-process"),
          watchdog_(report_) {}

    int run() {
        print_header();
        own_processes_ = own_processes_on_this_host();
        if (!options_.mpi || world_rank() == 0) run_local_checks();
        if (options_.mpi && world_rank() == 0) release_gpus();
        if (options_.mpi) {
            // A rank whose check 7 failed before its collectives goes on to MPI_Finalize while rank 0 waits
            // for it until its watchdog ends the check and writes the report: the finished rank waits that
            // long, so that its finalize's own limit does not end the job before rank 0 has reported.
            set_finalize_limit(options_.timeout_s + kWatchdogGrace + kFinalizeLimitSeconds);
            wait_for_rank0_checks();
            if (selected("mpi")) run_mpi_check();
        }
        return report_.finish();
    }

private:
    bool selected(const std::string& id) const {
        return std::find(selected_.begin(), selected_.end(), id) != selected_.end();
    }

    void print_header() {
        report_.set_fact("host", host_name());
        report_.set_fact("fault_injection", injection_.text);
        if (options_.mpi && world_rank() != 0) return;
        std::printf("doctor on %s: %d checks, each limited to %s s (--timeout)\n", host_name().c_str(),
                    int(all_checks().size()), format_number(options_.timeout_s).c_str());
        if (!injection_.text.empty())
            std::printf("FAULT INJECTION ACTIVE (FWI_DOCTOR_INJECT=%s): failures below are staged for tests\n",
                        injection_.text.c_str());
        std::fflush(stdout);
    }

    // This process, and under --mpi every rank on this host (rank 0's list; the others' is unused): check 1
    // does not count them as other processes on the GPUs.
    std::vector<unsigned> own_processes_on_this_host() const {
        const unsigned pid = static_cast<unsigned>(getpid());
        if (!options_.mpi) return {pid};
        std::vector<unsigned> here;
        const std::string host = host_name();
        for (const std::string& rank :
             gather_on_rank0(std::to_string(pid) + " " + host, "the ranks' process ids", options_.timeout_s)) {
            const size_t space = rank.find(' ');
            if (space != std::string::npos && rank.substr(space + 1) == host)
                here.push_back(static_cast<unsigned>(std::stoul(rank.substr(0, space))));
        }
        return here;
    }

    // Runs one check under its deadline and the watchdog, and reports it; an error becomes a FAIL, a hung
    // GPU the end.
    template <typename Body>
    void run_check(const std::string& id, const Body& body, bool probe_gpus = false) {
        report_.begin(id);
        report_.add(checked(id, body, probe_gpus));
    }

    // How long past a check's deadline the watchdog waits on this rank (kOtherRanksExtraGrace).
    double watchdog_grace() const {
        return kWatchdogGrace + (options_.mpi && world_rank() != 0 ? kOtherRanksExtraGrace : 0.0);
    }

    // The finding of one check run under its deadline and the watchdog (run_check without the report). With
    // probe_gpus, each GPU is then asked for a little work, still under the watchdog (gpus_refusing_work):
    // where a check's CUDA error stays in a GPU's context, every later GPU check would fail with it.
    template <typename Body>
    Finding checked(const std::string& id, const Body& body, bool probe_gpus = false) {
        const Deadline deadline(options_.timeout_s);
        watchdog_.arm(id, options_.timeout_s + watchdog_grace());
        Finding finding;
        try {
            finding = body(deadline);
        } catch (const DeviceHang& hang) {
            finding.id = id;
            finding.summary = std::string(hang.what()) + "; GPU work cannot be cancelled, so doctor ends here";
            finding.next = hang.next_step.empty() ? "check `nvidia-smi` and `dmesg | grep -i xid`" : hang.next_step;
            say_if_not_rank0(id, finding.summary);
            report_.abandon(std::move(finding));
        } catch (const std::exception& error) {
            say_if_not_rank0(id, error.what());
            finding = Finding{};
            finding.id = id;
            finding.status = Status::fail;
            finding.summary = error.what();
            finding.next = "a failing CUDA, NCCL or MPI call: its message names it; see README's table of symptoms";
        }
        if (probe_gpus) {
            const std::string refusing = gpus_refusing_work(system_);
            if (!refusing.empty())
                after_gpu_error_ = "after check " + std::to_string(check_number(id)) +
                                   "'s CUDA error, which CUDA keeps for the rest of the process, these GPUs take "
                                   "no more work: " +
                                   refusing + "; fix its cause, then run doctor again";
        }
        watchdog_.disarm();
        finding.facts.add("seconds", deadline.elapsed());
        return finding;
    }

    // Under --mpi only rank 0 reports. A check that fails on another rank, before a collective it then
    // never joins, would leave rank 0 to report only that it waited in vain: that rank says why, on stderr,
    // at once.
    void say_if_not_rank0(const std::string& id, const std::string& what) const {
        if (!options_.mpi || world_rank() == 0) return;
        std::fprintf(stderr, "doctor: rank %d on %s: check %s failed: %s\n", world_rank(), host_name().c_str(),
                     id.c_str(), what.c_str());
        std::fflush(stderr);
    }

    void skip(const std::string& id, const std::string& reason) {
        report_.begin(id);
        report_.add(skipped(id, reason));
    }

    void run_local_checks() {
        run_check("devices", [&](const Deadline& deadline) {
            nvml_ = std::make_unique<Nvml>();
            Finding finding = check_devices(variables_, *nvml_, own_processes_, system_, deadline);
            // The RESULT's env asks the driver about every GPU: ask now, under this check's time limit and
            // while they answer, rather than after a later check has left one hung and the run is abandoned.
            run_env_json();
            return finding;
        });
        report_.set_fact("gpus", system_.count);
        const bool gpus = system_.count > 0;
        // No GPU to check: none visible (exit 3), or check 1 failed on one that is (a GPU that cannot be
        // opened: exit 1, as check 1's FAIL says).
        const bool none_visible = !gpus && visible_gpu_count() == 0;
        if (none_visible) report_.set_no_gpu();
        const std::string no_gpu = none_visible ? "no GPU visible (check 1)" : "check 1 failed";
        const std::string single_process_only = "a single-process check: run doctor without --mpi and mpirun for it";

        if (options_.mpi)
            skip("topology", single_process_only);
        else if (!gpus)
            skip("topology", no_gpu);
        else
            run_check("topology", [&](const Deadline&) { return check_topology(*nvml_, system_); });

        // Check 6 reads only the host (check 2's pairs tell it which PCIe ports lie between the GPUs), so it
        // runs now and is held for its turn: where a GPU check hangs and ends the run, it is reported all the
        // same (ACS on a switch port, a cause of such hangs, would otherwise go unnamed).
        Finding host;
        if (selected("host")) {
            host = checked("host", [&](const Deadline&) { return check_host(system_.peer_pairs()); });
            report_.hold(host);
        }
        for (const std::string id : {"p2p", "bandwidth", "nccl"}) {
            if (!selected(id)) {
                skip(id, "not selected (--checks)");
            } else if (options_.mpi) {
                skip(id, single_process_only);
            } else if (!gpus) {
                skip(id, no_gpu);
            } else if (!after_gpu_error_.empty()) {
                skip(id, after_gpu_error_);
            } else {
                const auto body = [&](const Deadline& deadline) { return run_gpu_check(id, deadline); };
                run_check(id, body, /*probe_gpus=*/true);
            }
        }

        if (selected("host")) {
            report_.begin("host");
            report_.add(std::move(host));
        } else {
            skip("host", "not selected (--checks)");
        }
        if (!selected("mpi"))
            skip("mpi", "not selected (--checks)");
        else if (!options_.mpi)
            report_local_mpi_hint();
    }

    Finding run_gpu_check(const std::string& id, const Deadline& deadline) {
        if (id == "p2p") {
            P2pOptions options;
            options.injection = injection_;
            return check_p2p(system_, options, deadline);
        }
        if (id == "bandwidth") {
            BandwidthOptions options;
            options.bytes = size_t(options_.bandwidth_mib) << 20;
            options.cross_check = options_.cross_check;
            return check_bandwidth(system_, options, deadline);
        }
        NcclOptions options;
        options.largest_bytes = size_t(options_.nccl_mib) << 20;
        options.injection = injection_;
        return check_nccl(system_, variables_, options, deadline);
    }

    // Under --mpi, rank 0's check 1 opened every GPU it sees, and the other ranks on this host open theirs in
    // check 7: a GPU in exclusive-process compute mode (common on clusters) takes one process at a time, so
    // rank 0 lets them go first. (Errors are ignored: check 7 reports a GPU that does not open.) Only those
    // check 1 opened (system_.opened): it may have stopped at one that failed, and cudaSetDevice on a GPU not
    // yet opened would create its context here, outside any check's watchdog.
    // A driver call that hangs here would leave the other ranks waiting: the watchdog bounds it, as check 7's.
    void release_gpus() {
        watchdog_.arm("mpi", options_.timeout_s + kWatchdogGrace);
        for (int device = 0; device < system_.opened; ++device)
            if (cudaSetDevice(device) == cudaSuccess) cudaDeviceReset();
        cudaGetLastError();
        watchdog_.disarm();
    }

    // Without --mpi, check 7 only says how to run it (parse_options refused a launch by mpirun).
    void report_local_mpi_hint() {
        report_.begin("mpi");
        report_.add(skipped("mpi", "not run: start it with `mpirun -np <GPUs> doctor --mpi`"));
    }

    // Under --mpi, every rank but 0 waits here while rank 0 runs the local checks: so that check 7's
    // deadlines start together, and so that no rank reaches MPI_Finalize (which waits for the others only
    // a short while) long before rank 0 is done. The watchdog bounds the wait by what those checks may
    // take, in case rank 0 never comes.
    void wait_for_rank0_checks() {
        watchdog_.arm("mpi", double(all_checks().size()) * (options_.timeout_s + kWatchdogGrace));
        MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
        watchdog_.disarm();
    }

    void run_mpi_check() {
        run_check("mpi", [&](const Deadline& deadline) {
            MpiCheckOptions options;
            options.nccl_bytes = std::min(size_t(options_.nccl_mib) << 20, kNcclSummaryBytes);
            options.injection = injection_;
            return check_mpi(options, deadline);
        });
    }

    const Options& options_;
    std::vector<std::string> selected_;
    Injection injection_;
    Variables variables_;
    Report report_;
    Watchdog watchdog_;
    std::unique_ptr<Nvml> nvml_;
    std::vector<unsigned> own_processes_;
    GpuSystem system_;
    std::string after_gpu_error_;  // why the GPU checks left are skipped: a CUDA error stayed (checked)
};

}  // namespace

int main(int argc, char** argv) {
    const bool mpi = std::any_of(argv + 1, argv + argc, [](const char* arg) { return std::strcmp(arg, "--mpi") == 0; });
    const auto body = [&]() -> int {
        Options options;
        if (!parse_options(argc, argv, options)) return kExitOk;
        Doctor doctor(options, options.mpi ? world_rank() : 0);
        const int code = doctor.run();
        // In an MPI run rank 0 speaks for every rank; the others end cleanly so mpirun reports rank 0's code.
        return options.mpi && world_rank() != 0 ? kExitOk : code;
    };
    return mpi ? run_mpi_program("doctor", argc, argv, body) : run_program("doctor", body);
}
