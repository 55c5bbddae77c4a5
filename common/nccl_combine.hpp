// The NCCL combine of the FWI lessons 04, 05 and 06: one GPU's gradient and misfit summed in place over
// every GPU of its communicator, in device memory, on the share's stream. A sum, so the result is the
// gradient over all shots, exactly what one GPU computes alone. Header only: it joins the skeleton
// (GpuShare) and the NCCL helpers, which are libraries of their own.
#pragma once

#include <nccl.h>

#include <string>

#include "nccl_check.hpp"
#include "nccl_comm.hpp"
#include "shot_parallel.hpp"

namespace fwi {

// Enqueues this GPU's two allreduces, with no group and no wait: for a caller that issues several GPUs'
// calls in one group of its own (04's group driver).
inline void enqueue_nccl_sum(const GpuShare& share, ncclComm_t comm) {
    NCCL_CHECK(ncclAllReduce(share.device_gradient(), share.device_gradient(), share.gradient_count(), ncclFloat,
                             ncclSum, comm, share.stream()));
    NCCL_CHECK(
        ncclAllReduce(share.device_misfit(), share.device_misfit(), 1, ncclDouble, ncclSum, comm, share.stream()));
}

// The two allreduces as one group, then the wait for them. Where each GPU has a thread or a process of its
// own (04's threads driver, 05, 06), nothing needs grouping across GPUs: a call may wait for the other GPUs'
// calls without keeping them from being made, and the group only bundles the two calls into one launch.
// The wait is polled with a timeout: a rank that died would leave a plain cudaStreamSynchronize waiting
// forever.
inline void nccl_sum(GpuShare& share, ncclComm_t comm, double timeout_s) {
    const std::string what = "ncclAllReduce of the gradient and misfit";
    nccl_group({comm}, what, [&] { enqueue_nccl_sum(share, comm); });
    wait_for_nccl({comm}, {share.stream()}, what, timeout_s);
}

}  // namespace fwi
