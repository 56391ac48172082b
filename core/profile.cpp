#include "core/profile.h"

#include <omp.h>

#include <atomic>
#include <chrono>

namespace braid {

namespace {

std::array<std::atomic<int64_t>, kKernelGroups> g_ns{};
thread_local KernelTimer* t_current = nullptr;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

const char* kernel_group_name(KernelGroup g) {
  switch (g) {
    case KernelGroup::Gemm: return "gemm";
    case KernelGroup::Attention: return "attention";
    case KernelGroup::LmHead: return "lm_head";
    case KernelGroup::Elementwise: return "elementwise";
    case KernelGroup::Activation: return "activation";
    case KernelGroup::Optimizer: return "optimizer";
    case KernelGroup::kCount: break;
  }
  return "?";
}

double KernelTimes::total() const {
  double s = 0;
  for (double v : seconds) s += v;
  return s;
}

KernelTimes KernelTimes::operator-(const KernelTimes& earlier) const {
  KernelTimes d;
  for (int i = 0; i < kKernelGroups; ++i) d.seconds[i] = seconds[i] - earlier.seconds[i];
  return d;
}

KernelTimes& KernelTimes::operator+=(const KernelTimes& other) {
  for (int i = 0; i < kKernelGroups; ++i) seconds[i] += other.seconds[i];
  return *this;
}

KernelTimes kernel_times() {
  KernelTimes t;
  for (int i = 0; i < kKernelGroups; ++i)
    t.seconds[i] = 1e-9 * static_cast<double>(g_ns[i].load(std::memory_order_relaxed));
  return t;
}

// The parent's share ends where the child starts, and restarts where the child ends.
KernelTimer::KernelTimer(KernelGroup g, Nested nested)
    : group_(g), absorb_(nested == Nested::Absorb) {
  if (omp_in_parallel() || (t_current && t_current->absorb_)) return;
  active_ = true;
  start_ns_ = now_ns();
  parent_ = t_current;
  if (parent_)
    g_ns[static_cast<int>(parent_->group_)].fetch_add(start_ns_ - parent_->start_ns_,
                                                      std::memory_order_relaxed);
  t_current = this;
}

KernelTimer::~KernelTimer() {
  if (!active_) return;
  const int64_t end = now_ns();
  g_ns[static_cast<int>(group_)].fetch_add(end - start_ns_, std::memory_order_relaxed);
  t_current = parent_;
  if (parent_) parent_->start_ns_ = end;
}

}  // namespace braid
