// CommStreams: the ordering of device collectives between a rank's compute stream and its
// communication stream, behind a small stream interface so it runs (and is tested) without a GPU.
//
// For every operation: an event is recorded on the compute stream where the operation's input is
// final (e.g. a gradient bucket's last gradient written), the communication stream waits on that
// event, the operation is launched on the communication stream, and a completion event is
// recorded after it. The Work returned completes on that event (no host thread): the optimizer
// and anything else that needs the result waits on completion events only, while the compute
// stream goes on with the backward pass.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "parallel/work.h"

namespace braid {

// Streams and events as opaque handles: the CUDA runtime's (cuda_stream_ops()) or a test's fake.
class StreamOps {
 public:
  virtual ~StreamOps() = default;
  virtual void* event_create() = 0;
  virtual void event_destroy(void* event) = 0;
  virtual void event_record(void* event, void* stream) = 0;
  virtual void stream_wait_event(void* stream, void* event) = 0;
  virtual bool event_query(void* event) = 0;  // true when the work before it is done
  virtual void event_synchronize(void* event) = 0;
};

// The CUDA runtime's streams and events (core/kernels/cuda/runtime.h). Without the CUDA backend
// every call fails with the runtime's "no CUDA backend" message.
StreamOps& cuda_stream_ops();

class CommStreams {
 public:
  // Checks made while an operation is awaited (async errors, the timeout); may end the job.
  // `waited_s` is how long this wait has lasted.
  using Check = std::function<void(const std::string& what, double waited_s)>;

  // compute and comm are stream handles owned by the caller; both outlive this object.
  CommStreams(StreamOps& ops, void* compute_stream, void* comm_stream, Check check = {});
  CommStreams(const CommStreams&) = delete;
  CommStreams& operator=(const CommStreams&) = delete;

  // Orders `launch` (which queues the operation on the stream it is given) after the work queued
  // so far on the compute stream, and returns a Work that completes on the event recorded after
  // it. `what` names the operation in messages; `hold` (the operation's tensors) lives as long
  // as the handle.
  Work launch(const std::string& what, const std::function<void(void* comm_stream)>& launch,
              std::shared_ptr<void> hold = {});

  // Makes `stream` (e.g. the optimizer's) wait on a completion without blocking the host.
  void stream_wait(void* stream, const Work& w);

  void* compute_stream() const { return compute_; }
  void* comm_stream() const { return comm_; }
  StreamOps& ops() const { return ops_; }

 private:
  StreamOps& ops_;
  void* compute_;
  void* comm_;
  Check check_;
};

}  // namespace braid
