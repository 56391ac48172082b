// Wall time per kernel group, always on: where a training step's time goes, measured the same
// way the planner (`braid plan`, launch/plan/cpu_model.h) predicts it.
//
// A KernelTimer charges the wall time of its scope to one group of a context's Profiler. Scopes
// nest and time is exclusive: while an inner scope runs, the outer one is paused, so
// linear_forward's bias write counts as element-wise and its GEMM as GEMM. Only calls made outside
// OpenMP parallel regions are timed (inside one, the enclosing kernel's scope already covers the
// wall time), and the cost is two clock reads per kernel call. A fused kernel that calls other
// kernels (the LM head calls gemm_f32 per chunk) opens its scope with Nested::Absorb, so everything
// inside it counts as that kernel. The times are host wall time: a GPU backend (part 5) must
// record events or synchronise at scope ends for them to mean kernel time.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

namespace braid {

enum class KernelGroup : int {
  Gemm,         // gemm_f32 / gemm_bf16 outside other kernels
  Attention,    // the attention core (attention_forward / attention_backward)
  LmHead,       // the fused LM head + cross-entropy
  Elementwise,  // norms, adds, bias, RoPE, embedding, QKV split/merge copies
  Activation,   // GELU, SwiGLU
  Optimizer,    // per-step passes over all parameters: zero_grad, norm, clipping, AdamW
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

// The per-context counters (an ExecContext owns one): kernels launched through one context are
// charged to its profiler only, so two models trained side by side in one process keep their
// own figures. A context is driven by one host thread at a time, like a stream; the profiler's
// scope chain assumes that.
class Profiler {
 public:
  Profiler() = default;
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;
  // Seconds charged to each group since this profiler was made.
  KernelTimes times() const;

 private:
  friend class KernelTimer;
  std::array<std::atomic<int64_t>, kKernelGroups> ns_{};
  KernelTimer* current_ = nullptr;  // innermost open scope
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
