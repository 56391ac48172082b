// KernelTimer: exclusive nesting and no timing inside parallel regions.
#include <gtest/gtest.h>
#include <omp.h>

#include <chrono>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/profile.h"

namespace braid {
namespace {

void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

double group(const KernelTimes& t, KernelGroup g) { return t.seconds[static_cast<int>(g)]; }

TEST(Profile, NestedScopesChargeExclusiveTime) {
  Profiler prof;
  const KernelTimes before = prof.times();
  const auto t0 = std::chrono::steady_clock::now();
  {
    KernelTimer outer(prof, KernelGroup::Elementwise);
    sleep_ms(15);
    {
      KernelTimer inner(prof, KernelGroup::Gemm);
      sleep_ms(30);
    }
    sleep_ms(15);
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const KernelTimes d = prof.times() - before;
  const double elem = group(d, KernelGroup::Elementwise), gemm = group(d, KernelGroup::Gemm);
  EXPECT_GE(gemm, 0.030);
  EXPECT_GE(elem, 0.030);
  // The inner scope's time is not also charged to the outer one: the two partition the wall.
  EXPECT_LE(elem + gemm, wall + 1e-6);
  EXPECT_LE(elem, wall - 0.030 + 1e-6);
  EXPECT_EQ(group(d, KernelGroup::Attention), 0.0);
  EXPECT_NEAR(d.total(), elem + gemm, 1e-12);
}

TEST(Profile, AbsorbingScopeKeepsNestedTime) {
  Profiler prof;
  const KernelTimes before = prof.times();
  {
    KernelTimer outer(prof, KernelGroup::LmHead, Nested::Absorb);
    KernelTimer inner(prof, KernelGroup::Gemm);
    sleep_ms(20);
  }
  const KernelTimes d = prof.times() - before;
  EXPECT_GE(group(d, KernelGroup::LmHead), 0.020);
  EXPECT_EQ(group(d, KernelGroup::Gemm), 0.0);
}

TEST(Profile, ScopesInsideParallelRegionsAreNotTimed) {
  Profiler prof;
  const KernelTimes before = prof.times();
  bool active = false;
#pragma omp parallel num_threads(2)
  {
#pragma omp master
    active = omp_in_parallel();
    KernelTimer t(prof, KernelGroup::Attention);
    sleep_ms(10);
  }
  const KernelTimes d = prof.times() - before;
  if (!active) GTEST_SKIP() << "OpenMP gave this region one thread";
  EXPECT_EQ(group(d, KernelGroup::Attention), 0.0);
}

// Two profilers (two contexts) do not see each other's time, even when their scopes nest.
TEST(Profile, ProfilersAreIndependent) {
  Profiler a, b;
  {
    KernelTimer ta(a, KernelGroup::Gemm);
    sleep_ms(10);
  }
  {
    KernelTimer tb(b, KernelGroup::Attention);
    sleep_ms(10);
  }
  EXPECT_GE(group(a.times(), KernelGroup::Gemm), 0.010);
  EXPECT_EQ(group(a.times(), KernelGroup::Attention), 0.0);
  EXPECT_GE(group(b.times(), KernelGroup::Attention), 0.010);
  EXPECT_EQ(group(b.times(), KernelGroup::Gemm), 0.0);
}

// A device timeline whose marks carry times the test sets, as a stream's events would.
class FakeTimeline final : public DeviceTimeline {
 public:
  explicit FakeTimeline(double* clock) : clock_(clock) {}
  void mark() override { marks_.push_back(*clock_); }
  size_t pending() const override { return marks_.size(); }
  std::vector<double> drain() override {
    ++drains;
    std::vector<double> gaps;
    for (size_t i = 0; i + 1 < marks_.size(); ++i) gaps.push_back(marks_[i + 1] - marks_[i]);
    if (!marks_.empty()) marks_.erase(marks_.begin(), marks_.end() - 1);
    return gaps;
  }
  int drains = 0;

 private:
  double* clock_;
  std::vector<double> marks_;
};

// After a device fault recording an event fails too; the scopes that close while the op's own
// error unwinds must not throw again (that would end the process in std::terminate, hiding the
// fault), and the timeline stays off afterwards.
class FailingTimeline final : public DeviceTimeline {
 public:
  void mark() override {
    ++calls;
    if (fail) throw Error("cudaEventRecord: an illegal memory access was encountered");
  }
  size_t pending() const override { return 0; }
  std::vector<double> drain() override { return {}; }
  bool fail = false;
  int calls = 0;
};

TEST(Profile, AFailingDeviceMarkNeverThrowsFromAScope) {
  Profiler prof;
  auto timeline = std::make_unique<FailingTimeline>();
  FailingTimeline* fake = timeline.get();
  prof.use_device_timeline(std::move(timeline));
  try {
    KernelTimer outer(prof, KernelGroup::LmHead);
    fake->fail = true;
    throw Error("the op's own error");  // ~KernelTimer runs while this unwinds
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "the op's own error");
  }
  const int after = fake->calls;
  { KernelTimer again(prof, KernelGroup::Gemm); }
  EXPECT_EQ(fake->calls, after) << "the timeline was used after a failed mark";
  EXPECT_NO_THROW(prof.times());
}

// With a device timeline, the split comes from the marks (device time), not the host clock:
// the same exclusive nesting, measured between scope transitions.
TEST(Profile, DeviceTimelineChargesTheGapsBetweenMarks) {
  Profiler prof;
  double clock = 100.0;  // "device" seconds; the host barely moves
  auto timeline = std::make_unique<FakeTimeline>(&clock);
  FakeTimeline* fake = timeline.get();
  prof.use_device_timeline(std::move(timeline));
  {
    KernelTimer outer(prof, KernelGroup::Elementwise);  // mark at 100
    clock += 1.0;
    {
      KernelTimer inner(prof, KernelGroup::Gemm);  // mark at 101
      clock += 4.0;
    }  // mark at 105: back to elementwise
    clock += 2.0;
  }               // mark at 107: no scope
  clock += 50.0;  // outside any scope: charged to nobody
  {
    KernelTimer absorbing(prof, KernelGroup::LmHead, Nested::Absorb);  // mark at 157
    KernelTimer nested(prof, KernelGroup::Gemm);                       // absorbed: no mark
    clock += 8.0;
  }  // mark at 165
  const KernelTimes t = prof.times();
  EXPECT_DOUBLE_EQ(group(t, KernelGroup::Elementwise), 3.0);
  EXPECT_DOUBLE_EQ(group(t, KernelGroup::Gemm), 4.0);
  EXPECT_DOUBLE_EQ(group(t, KernelGroup::LmHead), 8.0);
  EXPECT_DOUBLE_EQ(t.total(), 15.0);
  // Reading again drains nothing new; a scope open across a read is split at the read.
  EXPECT_DOUBLE_EQ(prof.times().total(), 15.0);
  {
    KernelTimer a(prof, KernelGroup::Attention);
    clock += 3.0;
    {
      KernelTimer b(prof, KernelGroup::Activation);
      clock += 1.0;
      EXPECT_DOUBLE_EQ(group(prof.times(), KernelGroup::Attention), 3.0);
      clock += 1.0;
    }
  }
  const KernelTimes u = prof.times();
  EXPECT_DOUBLE_EQ(group(u, KernelGroup::Attention), 3.0);
  EXPECT_DOUBLE_EQ(group(u, KernelGroup::Activation), 2.0);
  EXPECT_GE(fake->drains, 3);
}

TEST(Profile, GroupNames) {
  EXPECT_STREQ(kernel_group_name(KernelGroup::Gemm), "gemm");
  EXPECT_STREQ(kernel_group_name(KernelGroup::LmHead), "lm_head");
  EXPECT_STREQ(kernel_group_name(KernelGroup::Optimizer), "optimizer");
}

}  // namespace
}  // namespace braid
