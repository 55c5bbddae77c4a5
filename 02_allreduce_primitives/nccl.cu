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
        if (comms_.empty()) return;  // aborted already (ending_comms_on_failure)
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

    // On non-blocking communicators the group may still be issued when it returns: wait_until_issued.
    void run(size_t count) override {
        ending_comms_on_failure([&] {
            const ncclResult_t status = nccl_group(comms_, kWhat, [&] {
                for (int rank = 0; rank < group_.size(); ++rank)
                    NCCL_CHECK(ncclAllReduce(group_.send(rank), group_.recv(rank), count, ncclFloat, ncclSum,
                                             comms_[rank], group_.stream(rank)));
            });
            wait_until_issued(status, comms_, kWhat, group_.timeout_s());
        });
    }
    // NCCL reports a failed collective through its communicators, not the streams, whose kernels then never
    // end: so the wait polls both (wait_for_nccl), and an NCCL error ends it at once, with NCCL's text, not
    // after --timeout as a hang.
    void wait() override {
        std::vector<cudaStream_t> streams;
        for (int rank = 0; rank < group_.size(); ++rank) streams.push_back(group_.stream(rank));
        ending_comms_on_failure([&] { wait_for_nccl(comms_, streams, kWhat, group_.timeout_s()); });
    }

private:
    static constexpr const char* kWhat = "the nccl variant's ncclAllReduce";

    // Runs `step`; after its failure the communicators are gone (nccl_group and wait_for_nccl abort them):
    // nothing is left for the destructor to end, and a later case of the benchmark, which keeps this
    // variant, is refused.
    template <typename Step>
    void ending_comms_on_failure(const Step& step) {
        if (comms_.empty())
            throw EnvironmentError(std::string(kWhat) + ": an earlier failure aborted the communicators");
        try {
            step();
        } catch (...) {
            comms_.clear();
            throw;
        }
    }

    std::vector<ncclComm_t> comms_;
};

}  // namespace

std::unique_ptr<AllreduceVariant> make_nccl(GpuGroup& group) { return std::make_unique<Nccl>(group); }

}  // namespace fwi
