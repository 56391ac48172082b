// CommStreams: compute-stream event -> comm-stream wait -> launch -> completion event.
#include "parallel/comm_streams.h"

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <list>
#include <mutex>
#include <thread>

#include "core/context.h"
#include "core/error.h"
#include "core/kernels/cuda/runtime.h"
#include "parallel/inflight_report.h"

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
  int current_device() override { return cuda::current_device(); }
  void set_device(int d) override { cuda::set_device(d); }
};
}  // namespace

StreamOps& cuda_stream_ops() {
  static CudaStreamOps ops;
  return ops;
}

namespace {

// The watchdog: one thread for the process, polling the completion event of every operation a
// watched CommStreams launched and running its checks, until the event fires or its owner is
// destroyed. The lock is held while it polls, so an owner's destructor (forget) waits for the
// round in progress and no check runs on a destroyed communicator.
class DeviceOpWatchdog {
 public:
  static DeviceOpWatchdog& get() {
    static DeviceOpWatchdog w;
    return w;
  }

  struct Op {
    const CommStreams* owner;
    StreamOps* ops;
    int device;                  // the launching thread's
    std::shared_ptr<void> done;  // the completion event; null while the launch is under way
    std::string what;
    std::chrono::steady_clock::time_point issued;
    CommStreams::Check check;
    int report_slot = -1;  // its line in the signal report (inflight::begin)
    uint64_t id = 0;
    std::string label;  // the owner's label, for describe()
  };

  // Returns the operation's id (for set_event and drop).
  uint64_t add(Op op) {
    std::lock_guard<std::mutex> lock(mu_);
    op.id = ++next_id_;
    ops_.push_back(std::move(op));
    if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
    return next_id_;
  }

  // The launch returned: from now on the operation is done when `done` fires.
  void set_event(uint64_t id, std::shared_ptr<void> done) {
    std::lock_guard<std::mutex> lock(mu_);
    for (Op& o : ops_)
      if (o.id == id) o.done = std::move(done);
  }

  void drop(uint64_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    erase_if([id](const Op& o) { return o.id == id; });
  }

  void forget(const CommStreams* owner) {
    std::lock_guard<std::mutex> lock(mu_);
    erase_if([owner](const Op& o) { return o.owner == owner; });
  }

  int in_flight() {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int>(ops_.size());
  }

  // "" when nothing is in flight, else the oldest operation ("<label>: <what>") and how many
  // more there are.
  std::string describe() {
    std::lock_guard<std::mutex> lock(mu_);
    if (ops_.empty()) return "";
    const Op& o = ops_.front();
    std::string d = fmt::format("{}: {}", o.label.empty() ? "braid" : o.label, o.what);
    if (ops_.size() > 1)
      d += fmt::format(" (and {} more communication operations)", ops_.size() - 1);
    return d;
  }

  ~DeviceOpWatchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      // Operations still listed at exit belong to communicators never destroyed: their events
      // are left to the driver's teardown rather than destroyed after the runtime may be gone.
      for (Op& o : ops_) new std::shared_ptr<void>(std::move(o.done));
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  static constexpr std::chrono::milliseconds kTick{20};

  void loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      cv_.wait_for(lock, kTick, [this] { return stop_; });
      if (stop_) break;
      const auto now = std::chrono::steady_clock::now();
      erase_if([&](const Op& o) { return poll(o, now); });
    }
  }

  // True when `o` is done with: its event fired, or its check ended it (the job, or by
  // throwing: a host wait on the operation runs the check again and throws). A launch still
  // under way (NCCL connects a channel or an algorithm on first use, inside the call, and
  // waits there for the peers) is checked like a running operation.
  bool poll(const Op& o, std::chrono::steady_clock::time_point now) {
    try {
      if (o.device != device_) {
        o.ops->set_device(o.device);
        device_ = o.device;
      }
      if (o.done && o.ops->event_query(o.done.get())) return true;
      if (o.check) o.check(o.what, std::chrono::duration<double>(now - o.issued).count());
      return false;
    } catch (const std::exception&) {
      return true;
    }
  }

  // Ends the report line of each operation `pred` accepts and forgets it.
  template <class Pred>
  void erase_if(Pred pred) {  // with mu_ held
    for (auto it = ops_.begin(); it != ops_.end();) {
      if (!pred(*it)) {
        ++it;
        continue;
      }
      inflight::end(it->report_slot);
      it = ops_.erase(it);
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::list<Op> ops_;
  std::thread thread_;
  bool stop_ = false;
  uint64_t next_id_ = 0;
  int device_ = -1;  // the watchdog thread's current device, once set
};

}  // namespace

CommStreams::CommStreams(StreamOps& ops, void* compute_stream, void* comm_stream, Check check,
                         bool watched)
    : ops_(ops),
      compute_(compute_stream),
      comm_(comm_stream),
      check_(std::move(check)),
      watched_(watched),
      device_(watched ? ops.current_device() : 0) {}

CommStreams::~CommStreams() { unwatch(); }

void CommStreams::unwatch() {
  if (watched_) DeviceOpWatchdog::get().forget(this);
  watched_ = false;
}

int CommStreams::watched_in_flight() { return DeviceOpWatchdog::get().in_flight(); }

std::string CommStreams::settle_watched(double max_wait_s) {
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    std::string busy = DeviceOpWatchdog::get().describe();
    if (busy.empty()) return busy;
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (waited >= max_wait_s)
      return fmt::format("{} had not finished after {:g} s", busy, max_wait_s);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

Work CommStreams::launch(const std::string& what,
                         const std::function<void(void* comm_stream)>& launch,
                         std::shared_ptr<void> hold) {
  StreamOps* ops = &ops_;
  const auto deleter = [ops](void* e) { ops->event_destroy(e); };
  // The input is final where the compute stream stands now.
  std::shared_ptr<void> ready(ops->event_create(), deleter);
  ops->event_record(ready.get(), compute_);
  ops->stream_wait_event(comm_, ready.get());
  Check check = check_;
  const auto issued = std::chrono::steady_clock::now();
  // Watched from before the launch: the launch itself can wait for the peers.
  uint64_t id = 0;
  if (watched_) {
    id = DeviceOpWatchdog::get().add(
        {this, ops, device_, nullptr, what, issued, check,
         inflight::begin(fmt::format("{}: ended by a signal while {} was in flight",
                                     label_.empty() ? "braid" : label_, what)),
         0, label_});
  }
  try {
    launch(comm_);
  } catch (...) {
    if (id) DeviceOpWatchdog::get().drop(id);
    throw;
  }
  std::shared_ptr<void> done(ops->event_create(), deleter);
  ops->event_record(done.get(), comm_);
  if (id) DeviceOpWatchdog::get().set_event(id, done);
  void* ev = done.get();
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

void wait_in_stream(ExecContext& ctx, const Work& w) {
  void* ev = w.device_event();
  if (ev && ctx.stream().handle && !w.done())
    cuda::stream_wait_event(ctx.stream().handle, ev);
  else
    w.wait();  // done, host-completed, or a host context: throws the operation's error if any
}

}  // namespace braid
