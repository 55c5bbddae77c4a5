// nccl: the reference. One communicator per GPU, all in this process, made as 04 makes them
// (nccl_init_all: what ncclCommInitAll does, within --timeout), and the n ncclAllReduce calls grouped so
// NCCL launches them together.
#include <exception>

#include "allreduce_variant.hpp"
#include "errors.hpp"
#include "nccl_check.hpp"
#include "nccl_comm.hpp"

namespace fwi {

namespace {

class Nccl final : public AllreduceVariant {
public:
    explicit Nccl(GpuGroup& group) : AllreduceVariant(group) {
        prepare_nccl();  // NVLink SHARP off unless the user set it; NCCL's version in the RESULT
        std::vector<int> devices(group.size());
        for (int rank = 0; rank < group.size(); ++rank) devices[rank] = rank;
        // Blocking communicators, as ncclCommInitAll and nccl-tests make them, so that the reference is
        // timed as NCCL is usually run; made under a time limit (common/nccl_comm.hpp says how).
        comms_ = nccl_init_all(devices, group.timeout_s());
    }
    ~Nccl() override {
        // A hung communicator cannot be finalized (that waits for its work); aborting does not wait for it.
        // So abort after a timeout, and on the way out of any error, which may have left an allreduce queued.
        if (gpu_work_abandoned() || std::uncaught_exceptions() > 0) {
            for (ncclComm_t comm : comms_) nccl_abort(comm);
            return;
        }
        try {
            nccl_destroy_all(comms_, group_.timeout_s());
        } catch (...) {  // a destructor cannot throw: the error ends the process here
            exit_at_once(std::current_exception(), "while ending the nccl variant's communicators");
        }
    }

    std::string name() const override { return "nccl"; }
    std::string description() const override { return "ncclAllReduce over one process's communicators (reference)"; }

    void run(size_t count) override {
        try {
            nccl_group(comms_, "the nccl variant's ncclAllReduce", [&] {
                for (int rank = 0; rank < group_.size(); ++rank)
                    NCCL_CHECK(ncclAllReduce(group_.send(rank), group_.recv(rank), count, ncclFloat, ncclSum,
                                             comms_[rank], group_.stream(rank)));
            });
        } catch (...) {
            comms_.clear();  // nccl_group aborted them: nothing is left to end
            throw;
        }
    }

private:
    std::vector<ncclComm_t> comms_;
};

}  // namespace

std::unique_ptr<AllreduceVariant> make_nccl(GpuGroup& group) { return std::make_unique<Nccl>(group); }

}  // namespace fwi
