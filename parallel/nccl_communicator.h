// NcclCommunicator: the device-memory Communicator over NCCL (CUDA builds with NCCL only).
// Plain C++: no CUDA or NCCL header, so launch/ and the CUDA-off build include it; there
// make_nccl_communicator throws a message saying the binary has no NCCL.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "parallel/communicator.h"

namespace braid {

// True when this binary was built with NCCL.
bool nccl_built();

struct NcclCommOptions {
  std::string name;                // the group's name in messages ("dp", "tp", ...)
  int world_rank = 0;              // this process, for messages
  void* compute_stream = nullptr;  // the rank's ExecContext stream (cudaStream_t)
  double timeout_s = 300.0;
  // Point-to-point channels (the pipeline group): a two-rank NCCL communicator and a stream for
  // each direction between this rank and each of its ring neighbours (group ranks r - 1 and
  // r + 1, wrapping). NCCL's send and recv block their stream until the peer's matching call
  // runs, so with one stream for every transfer a stage that receives a gradient before it
  // sends an activation waits for a peer doing the reverse; with a stream per direction each
  // stream carries one peer's messages in one order (tests/unit/test_pipeline_schedule.cpp
  // checks every schedule that way). Transfers to other ranks use the group's communicator.
  bool p2p_channels = false;
  // Ends the job with a message (World::abort_job); called after ncclCommAbort when an
  // operation outlives timeout_s or NCCL reports an asynchronous error.
  std::function<void(const std::string& message)> fatal;
};

// Collective over `bootstrap` (a host communicator of exactly the new group's members, e.g.
// the MPI group of the same mesh ranks): group rank 0 makes NCCL's unique id, broadcasts it
// over bootstrap, and every member joins. The calling thread's current device is used.
//
// The result takes device tensors (f32, bf16, f16, i32) and runs every operation on its own
// communication stream, ordered after the work queued so far on compute_stream (an event
// recorded there); its Work handles complete on CUDA events (no host thread). 16-bit sums are
// NCCL's (in the element type), not f32 per step as on the MPI path. send/recv ignore `tag`:
// transfers in one direction between a pair match in issue order.
std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap,
                                                     const NcclCommOptions& options);

}  // namespace braid
