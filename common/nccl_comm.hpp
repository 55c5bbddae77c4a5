// NCCL helpers that never hang: making a communicator and waiting on a collective are both given a
// timeout; after it (or on an asynchronous NCCL error) the communicators are aborted (ncclCommAbort) and
// an EnvironmentError (exit 3) names the operation and the ranks that waited.
//
// Every communicator is made in two steps within one timeout (and the finalize of the first step's
// communicator gets at least 5 s, even where the steps used all of it):
//   1. a non-blocking one (ncclConfig_t blocking = 0, NCCL >= 2.14, which the build requires): NCCL makes
//      it in the background, and any call on it may return ncclInProgress; the operation is done (for a
//      collective: on the stream) once ncclCommGetAsyncError no longer reports ncclInProgress, which is what
//      wait_for_nccl polls (with cudaStreamQuery);
//   2. from it, with ncclCommSplit (NCCL >= 2.18; the split of a non-blocking communicator is
//      non-blocking too), a blocking one of the same ranks: the one the functions below hand out. The
//      non-blocking one is then finalized and destroyed.
// Why not stop at 1: a group of calls on a non-blocking communicator is launched by a thread that NCCL starts
// for that group (2.18 to 2.28 at least): 05's combine, two allreduces in a group, took 0.14-0.23 ms on
// non-blocking communicators and 0.07-0.10 ms on blocking ones, on 2 x H200 (docs/PERFORMANCE.md, "NCCL's
// calls without a thread each"). A call on a blocking communicator returns once its kernels are on the
// stream, and a wait on the stream has the timeout.
// What keeps such a call from waiting on other ranks from the host: NCCL connects the ranks while the
// communicator is made, not at its first collective (prepare_nccl sets NCCL_RUNTIME_CONNECT=0 unless the user
// set it); a rank that never makes its call leaves the others' kernels waiting on their streams, which
// wait_for_nccl times out. That holds in NCCL's default launch mode (NCCL_LAUNCH_MODE=PARALLEL): with GROUP the
// ranks of one process also wait for each other inside their calls (doctor names these settings). NCCL's
// rule stays: one thread driving several ranks issues their calls inside one ncclGroupStart/End (04's
// README). With an NCCL before 2.18 the non-blocking communicators are handed out themselves.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <functional>
#include <string>
#include <vector>

#include "polling.hpp"

namespace fwi {

class ArgParser;  // cli.hpp

// "2.28.3" and "NCCL 2.28.3": the library loaded at run time (ncclGetVersion).
std::string nccl_version_number();
std::string nccl_version_string();

// Before a communicator is made (the functions below call it themselves): NVLS (NVLink SHARP, multicast) stays
// off unless the user set NCCL_NVLS_ENABLE, NCCL connects the ranks while making a communicator unless the
// user set NCCL_RUNTIME_CONNECT (see the top of this file), and the env of every later RESULT records which
// NCCL runs.
void prepare_nccl();
// The NCCL settings in this process's environment that let NCCL's calls wait inside NCCL, where
// --timeout cannot reach, one line each: NCCL_COMM_BLOCKING=1 (communicators made by calls that block),
// NCCL_RUNTIME_CONNECT other than 0 (the first collective connects the ranks, waiting for them) and
// NCCL_LAUNCH_MODE=GROUP (the GPUs of one process wait for each other inside their calls). prepare_nccl
// prints them as warnings, once a process; doctor's check 5 names them too.
std::vector<std::string> nccl_settings_without_time_limit();

// How to see which transports NCCL picked (NVLink, PCIe, network), for --verbose.
std::string nccl_transport_hint();

// --transport auto|network, for the programs with one rank per GPU (05, 06). "network" makes NCCL use its
// network transport (InfiniBand or sockets) even between GPUs of one host, so that one host shows what
// crossing nodes costs: NCCL_P2P_DISABLE=1 and NCCL_SHM_DISABLE=1 in this process's environment, over any
// value of the user's. "auto" (the default) leaves the choice to NCCL.
void add_nccl_transport_flag(ArgParser& parser, std::string& transport);
// Applies the --transport value: call it on every rank before the first NCCL call, since NCCL reads the
// variables when it starts (and the RESULT's env records them as they are when it is written). Returns
// the line the program prints at start-up, e.g. "transport: network (NCCL_P2P_DISABLE=1
// NCCL_SHM_DISABLE=1: what crossing nodes costs, measured on one host)".
std::string apply_nccl_transport(const std::string& transport);

// Polls until every comm's last operation is issued (ncclCommGetAsyncError no longer ncclInProgress: the
// polling is also what completes a non-blocking ncclGroupEnd) and the streams' work is done (streams may
// be empty: init, finalize). On an error or after timeout_s it aborts the comms (ncclCommAbort) and throws
// EnvironmentError naming `what` and the ranks; the comms are gone then: do not use or destroy them.
// The ranks are known for communicators made by the functions below (NCCL will not tell them while an
// operation is in progress or after an error); others show as "?". `timeout_hint`, where given, replaces
// the message's hint for a wait that timed out.
void wait_for_nccl(const std::vector<ncclComm_t>& comms, const std::vector<cudaStream_t>& streams,
                   const std::string& what, double timeout_s, const char* timeout_hint = nullptr);

// After a call or a group on non-blocking communicators (an NCCL before 2.18, or NCCL_COMM_BLOCKING=0 in the
// environment) that returned ncclInProgress: NCCL's thread is still issuing it, and nothing may be issued on
// the communicators, nor an event recorded behind its kernels, before that ends. Waits for it
// (wait_for_nccl without streams, naming "issuing <what>"); returns at once for any other status.
void wait_until_issued(ncclResult_t status, const std::vector<ncclComm_t>& comms, const std::string& what,
                       double timeout_s);

// For a call on communicators that may have collectives queued (a timed batch): NCCL reports a peer's
// failure at the next call, and the kernels already queued then wait for that peer without a limit (as
// would a cudaFree on the way out, or the process's end). So on an error the communicators are aborted
// before the EnvironmentError is thrown, as wait_for_nccl does; the comms are gone then. Returns the status
// otherwise (ncclSuccess, or ncclInProgress on a non-blocking communicator). `what` names the call.
ncclResult_t nccl_check_or_abort(ncclResult_t status, const std::vector<ncclComm_t>& comms, const std::string& what);

// One group of NCCL calls on `comms`: ncclGroupStart, `calls`, ncclGroupEnd, whose status goes through
// nccl_check_or_abort (so it returns ncclSuccess, or ncclInProgress on non-blocking communicators). A call
// that fails inside the group (a communicator returns an earlier error from its next call) first closes the
// group, which would otherwise take in this thread's later NCCL calls, then aborts the communicators, whose
// earlier groups may be queued behind it, and the error goes on. `what` names the calls.
ncclResult_t nccl_group(const std::vector<ncclComm_t>& comms, const std::string& what,
                        const std::function<void()>& calls);

// ncclCommAbort, the way every abort of the suite goes: one at a time in the process, as NCCL before 2.19
// does not support aborts from several threads at once, and within a limit, as some versions hang in the
// abort itself (joining a proxy thread stuck in the network). Past `limit_s` the process ends with exit 3
// and a line saying so, after `why` (what made the caller abort) where given, rather than hang on its way
// out. A null communicator (one a failed group never made) is left alone.
constexpr double kNcclAbortLimitSeconds = 30.0;
void nccl_abort(ncclComm_t comm, double limit_s = kNcclAbortLimitSeconds, const std::string& why = "");

// ncclGetUniqueId (the id every rank of a new communicator must be given), after prepare_nccl (NVLS off,
// the ranks connected while the communicator is made, unless the user set those).
ncclUniqueId nccl_unique_id();

// Communicators made as the top of this file says, one per device, all in this process (what
// ncclCommInitAll does, but ncclCommInitAll has no config variant: ncclGetUniqueId, then
// ncclCommInitRankConfig per device inside one ncclGroupStart/End, and the splits likewise). Rank r drives
// devices[r]. Both steps end within timeout_s (the finalize after them: at least 5 s more).
std::vector<ncclComm_t> nccl_init_all(const std::vector<int>& devices, double timeout_s);
// One communicator, made likewise, for `rank` of `nranks` on the current device (one process per GPU). The
// caller has lined the ranks up just before it (nccl_bootstrap_over_mpi), so a creation that does not
// finish in time is blamed on the connections between them, not on a rank that never came.
ncclComm_t nccl_init_rank(int nranks, const ncclUniqueId& id, int rank, double timeout_s);

// The clean end: ncclCommFinalize (flushes outstanding work), then ncclCommDestroy. Call it only after every
// collective was waited on with its stream (wait_for_nccl). On a non-blocking communicator the finalize is
// waited on with the timeout; on timeout, or a finalize that fails, the comms are aborted and an
// EnvironmentError is thrown. A blocking one's finalize, and any destroy, cannot be polled: past
// timeout_s and kNcclAbortLimitSeconds more, the process ends with exit 3 and a message
// (end_process_if_late).
// For the success path: a lesson that throws before it never destroys its communicators, as the process
// then exits and the driver frees them.
void nccl_destroy_all(const std::vector<ncclComm_t>& comms, double timeout_s);

// ---- The messages of a failed wait (the waiting itself: polling.hpp), testable without a GPU ----

// "rank 1 of 4", "ranks 0, 1, 2, 3 of 4"; an unknown rank (-1) or size (0) shows as "?"
std::string describe_ranks(const std::vector<int>& ranks, int nranks);

// The message of a failed wait, e.g. "ncclAllReduce of the gradient and misfit on rank 0 of 2: not
// finished after 10 s (--timeout); aborted the communicator. Hint: ..." `detail` is NCCL's error string
// for a failure.
std::string nccl_wait_failure_message(const std::string& what, const std::vector<int>& ranks, int nranks,
                                      WaitOutcome outcome, double timeout_s, const std::string& detail,
                                      const char* timeout_hint = nullptr);
// The hint of a creation between processes that all started it (nccl_init_rank) and did not finish in time.
extern const char* const kNcclConnectHint;

}  // namespace fwi
