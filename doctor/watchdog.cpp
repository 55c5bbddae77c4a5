#include "watchdog.hpp"

#include <chrono>

#include "errors.hpp"

namespace fwi::doctor {

DeviceHang::DeviceHang(const std::string& what, double seconds)
    : std::runtime_error(what + " did not finish within " + format_number(seconds) + " s") {}

Watchdog::Watchdog(Report& report) : report_(report), thread_([this] { watch(); }) {}

Watchdog::~Watchdog() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stopping_ = true;
    }
    changed_.notify_all();
    thread_.join();
}

void Watchdog::arm(const std::string& id, double seconds) {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        armed_ = true;
        id_ = id;
        seconds_ = seconds;
        since_armed_.restart();
    }
    changed_.notify_all();
}

void Watchdog::disarm() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        armed_ = false;
    }
    changed_.notify_all();
}

std::string rerun_stuck_check_advice(const std::string& id) {
    if (id == "devices" || id == "topology")
        return "checks 1 and 2 always run: rerun doctor --checks host (the fewest checks after them) with one GPU at "
               "a time (CUDA_VISIBLE_DEVICES=0, then 1, ...) to find the GPU that hangs";
    if (id == "mpi") return "rerun this check alone: mpirun -x NCCL_DEBUG=INFO -np <ranks> doctor --mpi --checks mpi";
    // Checks 3 and 4 make no NCCL call: what hangs there is a copy or a kernel between two GPUs.
    if (id == "p2p" || id == "bandwidth")
        return "rerun this check alone: doctor --checks " + id +
               "; a transfer between GPUs that never ends is a broken P2P path (IOMMU or ACS on PCIe, an NVLink down: "
               "`nvidia-smi nvlink -s`), and NCCL_P2P_DISABLE=1 keeps NCCL off it meanwhile";
    if (id == "nccl") return "rerun this check alone: NCCL_DEBUG=INFO doctor --checks nccl";
    return "rerun this check alone: doctor --checks " + id;  // check 6 reads only the host's files
}

void Watchdog::watch() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
        if (stopping_) return;
        if (!armed_) {
            changed_.wait(lock);
            continue;
        }
        const double left = seconds_ - since_armed_.seconds();
        if (left > 0.0) {
            changed_.wait_for(lock, std::chrono::duration<double>(left));
            continue;
        }
        Finding finding;
        finding.id = id_;
        finding.summary = "did not finish within " + format_number(seconds_) +
                          " s: blocked in a call that cannot be interrupted (CUDA driver, NCCL or MPI)";
        finding.next =
            "a hung driver shows in `nvidia-smi` (hangs too?) and `dmesg | grep -i xid`; a hung MPI job in the other "
            "ranks' output; " +
            rerun_stuck_check_advice(id_);
        // With the lock held to the end: a check that ends now cannot disarm and go on to report itself too.
        report_.abandon(std::move(finding));
    }
}

}  // namespace fwi::doctor
