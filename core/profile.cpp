// Kernel-group wall-time counters.
#include "core/profile.h"

#include <omp.h>

#include <atomic>
#include <chrono>
#include <cmath>

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

Profiler::Profiler() = default;
Profiler::~Profiler() = default;

void Profiler::use_device_timeline(std::unique_ptr<DeviceTimeline> timeline) {
  drain_timeline();
  timeline_ = std::move(timeline);
  mark_groups_.clear();
}

namespace {
// Drain long before the marks (events) of a run that never reads its times pile up.
constexpr size_t kMaxPendingMarks = 1 << 16;
}  // namespace

// Never throws: it runs in KernelTimer's destructor, also while an op's error unwinds (after a
// device fault recording an event fails too). A failed mark ends the device timeline; the fault
// itself is reported by the op that met it.
void Profiler::transition(int group_after) {
  if (timeline_failed_) return;
  try {
    timeline_->mark();
    mark_groups_.push_back(group_after);
    if (mark_groups_.size() >= kMaxPendingMarks) drain_timeline();
  } catch (const std::exception&) {
    timeline_failed_ = true;
  }
}

void Profiler::drain_timeline() const {
  if (!timeline_ || timeline_failed_ || timeline_->pending() == 0) return;
  const std::vector<double> gaps = timeline_->drain();
  for (size_t i = 0; i < gaps.size() && i < mark_groups_.size(); ++i) {
    const int g = mark_groups_[i];
    if (g != kNone) ns_[g].fetch_add(std::llround(gaps[i] * 1e9), std::memory_order_relaxed);
  }
  const int last = mark_groups_.empty() ? kNone : mark_groups_.back();
  mark_groups_.assign(1, last);
}

KernelTimes Profiler::times() const {
  drain_timeline();
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
  parent_ = current;
  if (profiler_.timeline_) {
    profiler_.current_ = this;
    profiler_.transition(static_cast<int>(group_));
    return;
  }
  start_ns_ = now_ns();
  if (parent_)
    profiler_.ns_[static_cast<int>(parent_->group_)].fetch_add(start_ns_ - parent_->start_ns_,
                                                               std::memory_order_relaxed);
  profiler_.current_ = this;
}

KernelTimer::~KernelTimer() {
  if (!active_) return;
  if (profiler_.timeline_) {
    profiler_.current_ = parent_;
    profiler_.transition(parent_ ? static_cast<int>(parent_->group_) : Profiler::kNone);
    return;
  }
  const int64_t end = now_ns();
  profiler_.ns_[static_cast<int>(group_)].fetch_add(end - start_ns_, std::memory_order_relaxed);
  profiler_.current_ = parent_;
  if (parent_) parent_->start_ns_ = end;
}

}  // namespace braid
