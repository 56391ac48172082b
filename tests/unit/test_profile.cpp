// KernelTimer: exclusive nesting and no timing inside parallel regions.
#include <gtest/gtest.h>
#include <omp.h>

#include <chrono>
#include <thread>

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

TEST(Profile, GroupNames) {
  EXPECT_STREQ(kernel_group_name(KernelGroup::Gemm), "gemm");
  EXPECT_STREQ(kernel_group_name(KernelGroup::LmHead), "lm_head");
  EXPECT_STREQ(kernel_group_name(KernelGroup::Optimizer), "optimizer");
}

}  // namespace
}  // namespace braid
