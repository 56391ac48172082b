// Wall time per kernel group, always on: where a training step's time goes, measured the same
// way the planner (`braid plan`, launch/plan/cpu_model.h) predicts it.
//
// A KernelTimer charges the wall time of its scope to one group of a context's Profiler. Scopes
// nest and time is exclusive: while an inner scope runs, the outer one is paused, so
// linear_forward's bias write counts as element-wise and its GEMM as GEMM. Only calls made outside
// OpenMP parallel regions are timed (inside one, the enclosing kernel's scope already covers the
// wall time), and the cost is two clock reads per kernel call. A fused kernel that calls other
// kernels (the LM head calls gemm_f32 per chunk) opens its scope with Nested::Absorb, so everything
// inside it counts as that kernel.
//
// On the CPU the times are host wall time. On a GPU kernels run later than their host calls, so
// host time would measure launches: a GPU context gives its profiler a DeviceTimeline, and every
// scope transition (open, close) records a mark in the stream instead of reading the host clock.
// The time between two consecutive marks belongs to the scope innermost after the first of them
// (none: uncharged), which is the same exclusive split, measured on the device. times() waits
// for the stream to reach the marks it reads.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

namespace braid {

enum class KernelGroup : int {
  Gemm,         // gemm_f32 / gemm_bf16 outside other kernels
  Attention,    // the attention core (attention_forward / attention_backward)
  LmHead,       // the fused LM head + cross-entropy
  Elementwise,  // norms, adds, bias, RoPE, embedding, column split/merge copies
  Activation,   // GELU, SwiGLU
  Optimizer,    // per-step passes over all parameters: the gradient norm, AdamW (clip inside)
  kCount
};
constexpr int kKernelGroups = static_cast<int>(KernelGroup::kCount);

// "gemm", "attention", "lm_head", "elementwise", "activation", "optimizer"
const char* kernel_group_name(KernelGroup g);

// Seconds charged to each group.
struct KernelTimes {
  std::array<double, kKernelGroups> seconds{};
  double total() const;
  KernelTimes operator-(const KernelTimes& earlier) const;
  KernelTimes& operator+=(const KernelTimes& other);
};

enum class Nested { Split, Absorb };
class KernelTimer;

// Marks recorded in a device queue (CUDA events on a stream, core/stream_timeline.h) and the
// seconds between them once the queue has passed them.
class DeviceTimeline {
 public:
  virtual ~DeviceTimeline() = default;
  // Records a mark after the work queued so far.
  virtual void mark() = 0;
  // Number of marks recorded and not yet drained.
  virtual size_t pending() const = 0;
  // Waits for the queue to pass every mark, returns the seconds between consecutive ones
  // (pending() - 1 values) and drops all marks but the last, which starts the next interval.
  virtual std::vector<double> drain() = 0;
};

// The per-context counters (an ExecContext owns one): kernels launched through one context are
// charged to its profiler only, so two models trained side by side in one process keep their
// own figures. A context is driven by one host thread at a time, like a stream; the profiler's
// scope chain assumes that.
class Profiler {
 public:
  Profiler();
  ~Profiler();
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;
  // Seconds charged to each group since this profiler was made. With a device timeline it
  // waits for the device to reach the last mark.
  KernelTimes times() const;
  // Time scopes on the device from now on (a GPU context sets its stream's timeline).
  void use_device_timeline(std::unique_ptr<DeviceTimeline> timeline);

 private:
  friend class KernelTimer;
  static constexpr int kNone = -1;
  // A scope transition: with a timeline, a mark followed by `group_after`; without, nothing.
  void transition(int group_after);
  void drain_timeline() const;
  mutable std::array<std::atomic<int64_t>, kKernelGroups> ns_{};
  KernelTimer* current_ = nullptr;  // innermost open scope
  std::unique_ptr<DeviceTimeline> timeline_;
  // Per pending mark, the group charged from it to the next one (kNone: no scope open).
  mutable std::vector<int> mark_groups_;
  bool timeline_failed_ = false;  // a mark failed (a device fault): the timeline is off
};

class KernelTimer {
 public:
  KernelTimer(Profiler& profiler, KernelGroup g, Nested nested = Nested::Split);
  ~KernelTimer();
  KernelTimer(const KernelTimer&) = delete;
  KernelTimer& operator=(const KernelTimer&) = delete;

 private:
  Profiler& profiler_;
  KernelGroup group_;
  KernelTimer* parent_ = nullptr;
  int64_t start_ns_ = 0;
  bool active_ = false;
  bool absorb_ = false;
};

}  // namespace braid
