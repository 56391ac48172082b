// Kernel-group wall-time counters.
#include "core/profile.h"

#include <omp.h>

#include <atomic>
#include <chrono>

namespace braid {

namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

const char* kernel_group_name(KernelGroup g) {
  switch (g) {
    case KernelGroup::Gemm:
      return "gemm";
    case KernelGroup::Attention:
      return "attention";
    case KernelGroup::LmHead:
      return "lm_head";
    case KernelGroup::Elementwise:
      return "elementwise";
    case KernelGroup::Activation:
      return "activation";
    case KernelGroup::Optimizer:
      return "optimizer";
    case KernelGroup::kCount:
      break;
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

KernelTimes Profiler::times() const {
  KernelTimes t;
  for (int i = 0; i < kKernelGroups; ++i)
    t.seconds[i] = 1e-9 * static_cast<double>(ns_[i].load(std::memory_order_relaxed));
  return t;
}

// The parent's share ends where the child starts, and restarts where the child ends.
KernelTimer::KernelTimer(Profiler& profiler, KernelGroup g, Nested nested)
    : profiler_(profiler), group_(g), absorb_(nested == Nested::Absorb) {
  KernelTimer* current = profiler_.current_;
  if (omp_in_parallel() || (current && current->absorb_)) return;
  active_ = true;
  start_ns_ = now_ns();
  parent_ = current;
  if (parent_)
    profiler_.ns_[static_cast<int>(parent_->group_)].fetch_add(start_ns_ - parent_->start_ns_,
                                                               std::memory_order_relaxed);
  profiler_.current_ = this;
}

KernelTimer::~KernelTimer() {
  if (!active_) return;
  const int64_t end = now_ns();
  profiler_.ns_[static_cast<int>(group_)].fetch_add(end - start_ns_, std::memory_order_relaxed);
  profiler_.current_ = parent_;
  if (parent_) parent_->start_ns_ = end;
}

}  // namespace braid
