// CommStreams: compute-stream event -> comm-stream wait -> launch -> completion event.
#include "parallel/comm_streams.h"

#include <chrono>
#include <thread>

#include "core/error.h"
#include "core/kernels/cuda/runtime.h"

namespace braid {

namespace {
class CudaStreamOps final : public StreamOps {
 public:
  void* event_create() override { return cuda::event_create(); }
  void event_destroy(void* e) override { cuda::event_destroy(e); }
  void event_record(void* e, void* s) override { cuda::event_record(e, s); }
  void stream_wait_event(void* s, void* e) override { cuda::stream_wait_event(s, e); }
  bool event_query(void* e) override { return cuda::event_query(e); }
  void event_synchronize(void* e) override { cuda::event_synchronize(e); }
};
}  // namespace

StreamOps& cuda_stream_ops() {
  static CudaStreamOps ops;
  return ops;
}

CommStreams::CommStreams(StreamOps& ops, void* compute_stream, void* comm_stream, Check check)
    : ops_(ops), compute_(compute_stream), comm_(comm_stream), check_(std::move(check)) {}

Work CommStreams::launch(const std::string& what,
                         const std::function<void(void* comm_stream)>& launch,
                         std::shared_ptr<void> hold) {
  StreamOps* ops = &ops_;
  const auto deleter = [ops](void* e) { ops->event_destroy(e); };
  // The input is final where the compute stream stands now.
  std::shared_ptr<void> ready(ops->event_create(), deleter);
  ops->event_record(ready.get(), compute_);
  ops->stream_wait_event(comm_, ready.get());
  launch(comm_);
  std::shared_ptr<void> done(ops->event_create(), deleter);
  ops->event_record(done.get(), comm_);
  void* ev = done.get();
  Check check = check_;
  const auto issued = std::chrono::steady_clock::now();
  Work w = Work::polled([ops, ev, check, what, issued](bool block) {
    if (ops->event_query(ev)) return true;
    if (!block) return false;
    // Polled, not event_synchronize: a stuck collective must reach the checks (async errors,
    // the timeout) instead of blocking this thread for ever.
    for (;;) {
      const double waited =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - issued).count();
      if (check) check(what, waited);
      if (ops->event_query(ev)) return true;
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  });
  // `ready` only has to outlive the stream wait queued on it; the runtime keeps the
  // dependency after the event is destroyed, but the fake streams of the tests inspect it.
  struct Keep {
    std::shared_ptr<void> ready, done, hold;
  };
  auto keep = std::make_shared<Keep>(Keep{std::move(ready), std::move(done), std::move(hold)});
  w.attach(ev, std::move(keep));
  return w;
}

void CommStreams::stream_wait(void* stream, const Work& w) {
  if (void* ev = w.device_event())
    ops_.stream_wait_event(stream, ev);
  else
    w.wait();  // host-completed work: nothing to queue on a stream
}

}  // namespace braid
