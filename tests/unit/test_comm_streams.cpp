// CommStreams with fake streams that record every record/wait/launch: the order of events on the
// compute and communication streams, completion on events (no host thread), the optimizer's
// stream waiting on completion events, and GradBuckets driving it in bucket order.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/micro_batch.h"
#include "parallel/comm_streams.h"
#include "parallel/grad_buckets.h"
#include "parallel/inflight_report.h"

namespace braid {
namespace {

// Streams are small integers cast to handles; an event is complete once its stream has run past
// the point where it was recorded. The compute stream runs at once; the communication stream
// runs one queued entry per event_query while `progress` is on (the device working).
class FakeStreams final : public StreamOps {
 public:
  static void* stream(intptr_t id) { return reinterpret_cast<void*>(id); }
  static constexpr intptr_t kCompute = 1, kComm = 2, kOptimizer = 3;

  std::vector<std::string> log;
  bool progress = false;
  int host_syncs = 0;

  void* event_create() override {
    events_.push_back({0, 0});
    return reinterpret_cast<void*>(static_cast<intptr_t>(events_.size()));
  }
  void event_destroy(void*) override {}
  void event_record(void* e, void* s) override {
    const intptr_t sid = id(s);
    ev(e) = {sid, ++queued_[sid]};
    if (sid != kComm) ran_[sid] = queued_[sid];
    log.push_back("record e" + std::to_string(id(e)) + " on " + name(sid));
  }
  void stream_wait_event(void* s, void* e) override {
    if (id(s) == kComm) ++queued_[kComm];
    log.push_back("wait " + name(id(s)) + " on e" + std::to_string(id(e)));
  }
  bool event_query(void* e) override {
    const auto [sid, seq] = ev(e);
    if (sid == kComm && progress && ran_[kComm] < queued_[kComm]) ++ran_[kComm];
    return ran_[sid] >= seq;
  }
  void event_synchronize(void*) override { ++host_syncs; }
  void launch(const std::string& what) {
    ++queued_[kComm];
    log.push_back("launch " + what);
  }

 private:
  static intptr_t id(void* p) { return reinterpret_cast<intptr_t>(p); }
  static std::string name(intptr_t s) {
    return s == kCompute ? "compute" : s == kComm ? "comm" : "optimizer";
  }
  std::pair<intptr_t, int>& ev(void* e) { return events_[static_cast<size_t>(id(e)) - 1]; }
  std::vector<std::pair<intptr_t, int>> events_;
  std::map<intptr_t, int> queued_, ran_;
};

TEST(CommStreams, OrdersComputeEventWaitLaunchCompletion) {
  FakeStreams fs;
  std::vector<std::string> checked;
  CommStreams cs(fs, FakeStreams::stream(FakeStreams::kCompute),
                 FakeStreams::stream(FakeStreams::kComm),
                 [&](const std::string& what, double) { checked.push_back(what); });
  Work a = cs.launch("all_reduce A", [&](void* s) {
    EXPECT_EQ(s, FakeStreams::stream(FakeStreams::kComm));
    fs.launch("A");
  });
  Work b = cs.launch("all_reduce B", [&](void*) { fs.launch("B"); });
  const std::vector<std::string> want = {
      "record e1 on compute", "wait comm on e1", "launch A", "record e2 on comm",
      "record e3 on compute", "wait comm on e3", "launch B", "record e4 on comm"};
  EXPECT_EQ(fs.log, want);
  // Nothing ran on the communication stream: neither is done, and asking does not block.
  EXPECT_FALSE(a.done());
  EXPECT_FALSE(b.done());
  EXPECT_NE(a.device_event(), nullptr);
  // The optimizer's stream waits on B's completion event; the host does not.
  cs.stream_wait(FakeStreams::stream(FakeStreams::kOptimizer), b);
  EXPECT_EQ(fs.log.back(), "wait optimizer on e4");
  fs.progress = true;
  a.wait();  // polls the event (running the checks), never a host thread or a device sync
  EXPECT_TRUE(a.done());
  EXPECT_FALSE(checked.empty());
  EXPECT_EQ(checked.front(), "all_reduce A");
  b.wait();
  EXPECT_TRUE(b.done());
  EXPECT_EQ(fs.host_syncs, 0);
}

TEST(CommStreams, ACheckThatThrowsEndsTheWait) {
  FakeStreams fs;  // no progress: the operation never completes
  CommStreams cs(fs, FakeStreams::stream(FakeStreams::kCompute),
                 FakeStreams::stream(FakeStreams::kComm),
                 [](const std::string& what, double) { throw Error(what + " timed out"); });
  Work w = cs.launch("broadcast", [&](void*) { fs.launch("x"); });
  EXPECT_THROW(w.wait(), Error);
}

// A communicator whose collectives go through CommStreams (as the NCCL one's do), recording
// which bucket each launch reduces.
class StreamComm final : public Communicator {
 public:
  StreamComm(FakeStreams& fs)
      : Communicator("fake", {0, 1}, 0, 10.0),
        fs_(fs),
        cs_(fs, FakeStreams::stream(FakeStreams::kCompute),
            FakeStreams::stream(FakeStreams::kComm)) {}
  Work all_reduce(Tensor t, ReduceOp) override {
    return cs_.launch("all_reduce", [&](void*) { fs_.launch(std::to_string(t.numel())); });
  }
  Work reduce_scatter(Tensor, Tensor, ReduceOp) override { return Work(); }
  Work all_gather(Tensor, Tensor) override { return Work(); }
  Work broadcast(Tensor, int) override { return Work(); }
  Work send(Tensor, int, int) override { return Work(); }
  Work recv(Tensor, int, int) override { return Work(); }
  Work barrier() override { return Work(); }

 private:
  FakeStreams& fs_;
  CommStreams cs_;
};

TEST(CommStreams, GradBucketsLaunchInBucketOrderEachAfterItsComputeEvent) {
  ExecContext ctx;
  std::vector<std::unique_ptr<Parameter>> owned;
  std::vector<Parameter*> ps;
  for (int n : {10, 20, 30}) {  // order of use: buckets are {30} {20} {10}
    std::string name = std::to_string(n);
    name.insert(name.begin(), 'p');
    owned.push_back(std::make_unique<Parameter>(name, ctx.zeros({n})));
    ps.push_back(owned.back().get());
  }
  FakeStreams fs;
  StreamComm comm(fs);
  GradBucketOptions o;
  o.first_bucket_bytes = 4 * 30;
  o.bucket_bytes = 4 * 20;
  GradBuckets gb(ctx, ps, comm, o);
  ASSERT_EQ(gb.buckets().size(), 3u);
  gb.begin_step(1);
  MicroBatch mb(ctx);
  gb.attach(mb);
  mb.grad_ready(*ps[1]);  // bucket 1 complete before bucket 0: held back
  EXPECT_TRUE(fs.log.empty());
  mb.grad_ready(*ps[2]);  // bucket 0, then 1, start
  const size_t after_two = fs.log.size();
  mb.grad_ready(*ps[0]);
  const std::vector<std::string> want = {
      "record e1 on compute", "wait comm on e1", "launch 30", "record e2 on comm",
      "record e3 on compute", "wait comm on e3", "launch 20", "record e4 on comm",
      "record e5 on compute", "wait comm on e5", "launch 10", "record e6 on comm"};
  EXPECT_EQ(after_two, 8u);
  EXPECT_EQ(fs.log, want);
  for (const auto& b : gb.buckets()) EXPECT_FALSE(b.work.done());
  fs.progress = true;
  gb.finish();  // waits on the three completion events only
  EXPECT_EQ(fs.host_syncs, 0);
  for (const auto& b : gb.buckets()) EXPECT_TRUE(b.work.done());
}

// Streams for the watchdog tests: callable from any thread; an event completes when the test
// says so.
class ThreadSafeStreams final : public StreamOps {
 public:
  explicit ThreadSafeStreams(int device = 3) : device_(device) {}
  void* event_create() override {
    std::lock_guard<std::mutex> lock(mu_);
    return reinterpret_cast<void*>(static_cast<intptr_t>(++events_));
  }
  void event_destroy(void* e) override {
    std::lock_guard<std::mutex> lock(mu_);
    destroyed_.insert(e);
  }
  void event_record(void*, void*) override {}
  void stream_wait_event(void*, void*) override {}
  bool event_query(void* e) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++queries_;
    return complete_.count(e) > 0;
  }
  void event_synchronize(void*) override {}
  int current_device() override { return device_; }  // the launching thread's
  void set_device(int d) override {
    std::lock_guard<std::mutex> lock(mu_);
    set_devices_.push_back(d);
  }
  std::vector<int> set_devices() {
    std::lock_guard<std::mutex> lock(mu_);
    return set_devices_;
  }
  void complete(void* e) {
    std::lock_guard<std::mutex> lock(mu_);
    complete_.insert(e);
  }
  int queries() {
    std::lock_guard<std::mutex> lock(mu_);
    return queries_;
  }
  bool destroyed(void* e) {
    std::lock_guard<std::mutex> lock(mu_);
    return destroyed_.count(e) > 0;
  }

 private:
  std::mutex mu_;
  intptr_t events_ = 0;
  int queries_ = 0;
  std::set<void*> complete_, destroyed_;
  std::vector<int> set_devices_;
  const int device_;
};

// Polls `pred` for up to 5 s.
template <class P>
bool eventually(P pred) {
  const auto start = std::chrono::steady_clock::now();
  while (!pred()) {
    if (std::chrono::steady_clock::now() - start > std::chrono::seconds(5)) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

// The tensor-parallel regions make the compute stream wait on a collective's event and never wait
// on the host: a stuck collective must still end the job, through the watchdog's checks.
TEST(CommStreamsWatchdog, ChecksAStuckOperationThatNoHostThreadWaitsFor) {
  ThreadSafeStreams ops;
  std::mutex mu;
  std::string timed_out;
  double waited_at_timeout = 0;
  std::atomic<int> checks{0};
  constexpr double kTimeout = 0.2;
  CommStreams cs(
      ops, reinterpret_cast<void*>(1), reinterpret_cast<void*>(2),
      [&](const std::string& what, double waited) {
        ++checks;
        if (waited <= kTimeout) return;
        {
          std::lock_guard<std::mutex> lock(mu);
          timed_out = what;
          waited_at_timeout = waited;
        }
        throw Error(what + " timed out");  // the job would end here (the fatal handler)
      },
      /*watched=*/true);
  const auto start = std::chrono::steady_clock::now();
  Work w = cs.launch("all_reduce(sum, x) on group 'tp'", [](void*) {});
  ASSERT_NE(w.device_event(), nullptr);
  EXPECT_EQ(CommStreams::watched_in_flight(), 1);
  ASSERT_TRUE(eventually([&] {
    std::lock_guard<std::mutex> lock(mu);
    return !timed_out.empty();
  })) << "the watchdog never ran the check past the timeout";
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(timed_out, "all_reduce(sum, x) on group 'tp'");
    EXPECT_GT(waited_at_timeout, kTimeout);
  }
  EXPECT_LT(elapsed, kTimeout + 2.0) << "the watchdog noticed late";
  EXPECT_GE(checks.load(), 2) << "checked before the timeout too";
  EXPECT_TRUE(eventually([] { return CommStreams::watched_in_flight() == 0; }))
      << "the watchdog kept watching after the check ended the operation";
  // A host wait on the same operation runs the check itself and throws.
  EXPECT_THROW(w.wait(), Error);
}

// NCCL connects a channel on its first use inside the launch call, which waits there for the
// peer: a peer that never comes must still end the job, so the watchdog checks a launch that has
// not returned.
TEST(CommStreamsWatchdog, ChecksALaunchThatDoesNotReturn) {
  ThreadSafeStreams ops;
  std::atomic<bool> timed_out{false};
  std::mutex mu;
  std::string what_seen;
  CommStreams cs(
      ops, reinterpret_cast<void*>(1), reinterpret_cast<void*>(2),
      [&](const std::string& what, double waited) {
        if (waited <= 0.1) return;
        {
          std::lock_guard<std::mutex> lock(mu);
          what_seen = what;
        }
        timed_out = true;
        throw Error(what + " timed out");
      },
      /*watched=*/true);
  Work w = cs.launch("send(x) to group rank 1", [&](void*) {
    // The first send on a channel, its peer never arriving: returns only once the watchdog has
    // run the check past the timeout (or after 5 s, failing below).
    eventually([&] { return timed_out.load(); });
  });
  EXPECT_TRUE(timed_out.load()) << "the watchdog did not check the launch in progress";
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(what_seen, "send(x) to group rank 1");
  }
  EXPECT_TRUE(eventually([] { return CommStreams::watched_in_flight() == 0; }));
  // A launch that throws leaves nothing behind.
  EXPECT_THROW(cs.launch("bad", [](void*) { throw Error("NCCL refused"); }), Error);
  EXPECT_EQ(CommStreams::watched_in_flight(), 0);
}

TEST(CommStreamsWatchdog, LetsGoOfCompletedOperationsWithoutCheckingThem) {
  ThreadSafeStreams ops(/*device=*/7);  // no other test's device: the watchdog must switch
  std::atomic<int> checks{0};
  CommStreams cs(
      ops, reinterpret_cast<void*>(1), reinterpret_cast<void*>(2),
      [&](const std::string&, double) { ++checks; }, /*watched=*/true);
  Work a = cs.launch("a", [](void*) {});
  Work b = cs.launch("b", [](void*) {});
  EXPECT_EQ(CommStreams::watched_in_flight(), 2);
  void* ev = a.device_event();
  a = Work();  // the caller is done with the handle; the watchdog still holds the event
  EXPECT_FALSE(ops.destroyed(ev));
  ops.complete(ev);
  ops.complete(b.device_event());
  EXPECT_TRUE(eventually([] { return CommStreams::watched_in_flight() == 0; }));
  for (const std::string& l : inflight::recorded())
    EXPECT_EQ(l.find(" was in flight"), std::string::npos) << "still reported: " << l;
  EXPECT_TRUE(ops.destroyed(ev)) << "the completion event outlived both its holders";
  EXPECT_EQ(checks.load(), 0);
  EXPECT_TRUE(b.done());
  // The watchdog thread made the launching thread's device its own before polling (a thread
  // without one would make a context on GPU 0).
  EXPECT_EQ(ops.set_devices(), std::vector<int>{7});
}

TEST(CommStreamsWatchdog, UnwatchForgetsTheOperationsAndStopsTheChecks) {
  ThreadSafeStreams ops;
  std::atomic<int> checks{0};
  CommStreams cs(
      ops, reinterpret_cast<void*>(1), reinterpret_cast<void*>(2),
      [&](const std::string&, double) { ++checks; }, /*watched=*/true);
  cs.set_label("braid: rank 3: group 'tp' (group rank 1 of 2, NCCL)");
  Work w = cs.launch("stuck", [](void*) {});
  // While it is in flight, a signal that ends the job reports it.
  const std::string line =
      "braid: rank 3: group 'tp' (group rank 1 of 2, NCCL): ended by a signal while stuck was in "
      "flight";
  auto reported = [&] {
    for (const std::string& l : inflight::recorded())
      if (l == line) return true;
    return false;
  };
  EXPECT_TRUE(reported()) << "not in the signal report";
  ASSERT_TRUE(eventually([&] { return checks.load() > 0; }));
  cs.unwatch();  // what a communicator's destructor does before it frees what the check uses
  EXPECT_EQ(CommStreams::watched_in_flight(), 0);
  EXPECT_FALSE(reported()) << "still in the signal report after unwatch";
  const int after = checks.load();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(checks.load(), after) << "a check ran after unwatch returned";
  Work later = cs.launch("later", [](void*) {});
  EXPECT_EQ(CommStreams::watched_in_flight(), 0) << "an unwatched object handed on an operation";
}

// Before an out-of-memory retry returns the allocator's cache (which waits for every stream),
// the communication in flight must finish: settle_watched waits for it, a bounded time.
TEST(CommStreamsWatchdog, SettleWaitsForTheOperationsInFlightAndNamesOneThatStays) {
  ThreadSafeStreams ops;
  CommStreams cs(
      ops, reinterpret_cast<void*>(1), reinterpret_cast<void*>(2),
      [](const std::string&, double) {}, /*watched=*/true);
  cs.set_label("braid: rank 1: group 'pp' (group rank 0 of 2, NCCL)");
  EXPECT_EQ(CommStreams::settle_watched(0.0), "") << "nothing in flight";
  Work a = cs.launch("recv(x) from group rank 1", [](void*) {});
  Work b = cs.launch("send(y) to group rank 1", [](void*) {});
  // One completes while settle waits: it returns once the watchdog has seen it, well before
  // the bound.
  std::thread finisher([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ops.complete(a.device_event());
    ops.complete(b.device_event());
  });
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(CommStreams::settle_watched(5.0), "");
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  finisher.join();
  EXPECT_GE(took, 0.04);
  EXPECT_LT(took, 2.0);
  // One that never completes: named, with the others counted, after the bound.
  Work c = cs.launch("recv(z) from group rank 1", [](void*) {});
  Work d = cs.launch("send(w) to group rank 1", [](void*) {});
  EXPECT_EQ(CommStreams::settle_watched(0.1),
            "braid: rank 1: group 'pp' (group rank 0 of 2, NCCL): recv(z) from group rank 1 (and "
            "1 more communication operations) had not finished after 0.1 s");
  cs.unwatch();
  EXPECT_EQ(CommStreams::settle_watched(0.0), "");
}

TEST(CommStreamsWatchdog, UnwatchedObjectsAreNotWatched) {
  ThreadSafeStreams ops;
  CommStreams cs(ops, reinterpret_cast<void*>(1), reinterpret_cast<void*>(2));
  Work w = cs.launch("x", [](void*) {});
  EXPECT_EQ(CommStreams::watched_in_flight(), 0);
}

// On a host context there is no stream to wait on: wait_in_stream waits on the host, and throws
// what the operation's checks throw.
TEST(CommStreamsWatchdog, WaitInStreamOnAHostContextWaitsOnTheHost) {
  ExecContext host;
  ThreadSafeStreams ops;
  CommStreams cs(ops, reinterpret_cast<void*>(1), reinterpret_cast<void*>(2),
                 [](const std::string& what, double waited) {
                   if (waited > 0.05) throw Error(what + " timed out");
                 });
  Work done = cs.launch("done", [](void*) {});
  ops.complete(done.device_event());
  wait_in_stream(host, done);
  EXPECT_TRUE(done.done());
  Work stuck = cs.launch("stuck", [](void*) {});
  EXPECT_THROW(wait_in_stream(host, stuck), Error);
  wait_in_stream(host, Work::completed());
}

}  // namespace
}  // namespace braid
