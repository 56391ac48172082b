// CommStreams: the ordering of device collectives between a rank's compute stream and its
// communication stream, behind a small stream interface so it runs (and is tested) without a GPU.
//
// For every operation: an event is recorded on the compute stream where the operation's input is
// final (e.g. a gradient bucket's last gradient written), the communication stream waits on that
// event, the operation is launched on the communication stream, and a completion event is
// recorded after it. The Work returned completes on that event (no host thread): the optimizer
// and anything else that needs the result waits on completion events only, while the compute
// stream goes on with the backward pass.
//
// A watched CommStreams (the NCCL communicator's) also hands each operation to one process-wide
// watchdog thread, which polls its completion event and runs the checks (asynchronous errors,
// the timeout) until it completes. So a stuck collective ends the job within the timeout even
// when no host thread waits for it: when the compute stream waits on its event (wait_in_stream)
// and the host then blocks in a plain device synchronisation behind it.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "parallel/work.h"

namespace braid {

class ExecContext;

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
  // The calling thread's device, and making it another thread's (the watchdog's: a CUDA call
  // from a thread with no device set would make GPU 0's context on every rank).
  virtual int current_device() { return 0; }
  virtual void set_device(int) {}
};

// The CUDA runtime's streams and events (core/kernels/cuda/runtime.h). Without the CUDA backend
// every call fails with the runtime's "no CUDA backend" message.
StreamOps& cuda_stream_ops();

class CommStreams {
 public:
  // Checks made while an operation is awaited (async errors, the timeout); may end the job.
  // `waited_s` is how long this wait has lasted.
  using Check = std::function<void(const std::string& what, double waited_s)>;

  // compute and comm are stream handles owned by the caller; both outlive this object. With
  // `watched`, every launched operation is polled by the watchdog thread (about every 20 ms),
  // which runs `check` on it until its completion event fires; `ops` must then be safe to call
  // from that thread (the CUDA runtime's are). `check` may end the job; an exception it throws
  // there is dropped (a host wait on the same operation runs the check again and throws it).
  CommStreams(StreamOps& ops, void* compute_stream, void* comm_stream, Check check = {},
              bool watched = false);
  ~CommStreams();  // unwatch()

  // The watchdog forgets this object's operations and takes no new ones; returns after any
  // check in progress on them. Call before destroying what `check` uses.
  void unwatch();
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

  // Operations launched by watched objects that the watchdog has not yet seen complete.
  static int watched_in_flight();
  // Waits up to max_wait_s for every watched operation to complete (as the watchdog sees it);
  // "" when they have, else the oldest one still in flight and how long was waited, e.g.
  // "braid: rank 1: group 'pp' ...: recv from rank 2 (and 1 more communication operations)
  // had not finished after 30 s". The device release guard (core/device_memory.h) of GPU runs.
  static std::string settle_watched(double max_wait_s);
  // Watched objects: each operation is also in the report written when a signal ends the job
  // (parallel/inflight_report.h) until it completes, as "<label>: <what> ...", e.g. the label
  // "braid: rank 3: group 'tp' (group rank 1 of 2)".
  void set_label(std::string label) { label_ = std::move(label); }

  void* compute_stream() const { return compute_; }
  void* comm_stream() const { return comm_; }
  StreamOps& ops() const { return ops_; }

 private:
  StreamOps& ops_;
  void* compute_;
  void* comm_;
  Check check_;
  bool watched_;
  int device_;  // the device the watchdog sets before polling this object's events
  std::string label_;
};

// Orders whatever is queued next on ctx's stream after w, without blocking the host where it can:
// a Work that completes on a device event (a watched CommStreams' operation, so a stuck one still
// ends the job) on a device context is waited for by the context's stream; any other Work by the
// host (Work::wait).
void wait_in_stream(ExecContext& ctx, const Work& w);

}  // namespace braid
