// CommStreams with fake streams that record every record/wait/launch: the order of events on the
// compute and communication streams, completion on events (no host thread), the optimizer's
// stream waiting on completion events, and GradBuckets driving it in bucket order.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/micro_batch.h"
#include "parallel/comm_streams.h"
#include "parallel/grad_buckets.h"

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
                 FakeStreams::stream(FakeStreams::kComm), [](const std::string& what, double) {
                   throw Error(what + " timed out");
                 });
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

}  // namespace
}  // namespace braid
