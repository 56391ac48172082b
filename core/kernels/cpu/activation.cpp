// CPU GELU (tanh form) and SwiGLU, forward and backward: OpenMP over spans, SIMD within.
// The exp clamps in fast_math.h only if-convert (and so vectorise) when float compares are not
// treated as trapping; nothing in braid reads the floating-point exception flags.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif

#include "core/kernels/math/activation.h"

#include <algorithm>

#include "core/kernels/cpu/cpu_checks.h"
#include "core/kernels/cpu/cpu_kernels.h"
#include "core/kernels/cpu/fast_math.h"
#include "core/kernels/cpu/lowp.h"
#include "core/profile.h"

namespace braid {

namespace {

// Elements per task: large enough to amortise the call, small enough to balance threads.
constexpr int64_t kSpan = 8192;

// The per-element math is core/kernels/math/activation.h (shared with the CUDA kernels).
// y may be x.
BRAID_CPU_CLONES void gelu_forward_span(float* y, const float* x, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = math::gelu(x[i]);
}

// dx may be dy.
BRAID_CPU_CLONES void gelu_backward_span(float* dx, const float* dy, const float* x, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) dx[i] = math::gelu_grad(dy[i], x[i]);
}

BRAID_CPU_CLONES void swiglu_forward_span(float* y, const float* gate, const float* up, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = math::swiglu(gate[i], up[i]);
}

BRAID_CPU_CLONES void swiglu_backward_span(float* dgate, float* dup, const float* dy,
                                           const float* gate, const float* up, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) math::swiglu_grad(dy[i], gate[i], up[i], dgate[i], dup[i]);
}

}  // namespace

namespace cpu {

void gelu_forward(ExecContext& ctx, Tensor& y, const Tensor& x) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Activation);
  if (any_low_precision({&y, &x})) {  // bf16/f16 storage: f32 arithmetic on staged copies
    F32Staging s(ctx, "gelu_forward");
    Tensor y32 = s.out(y, "y");
    cpu::gelu_forward(ctx, y32, s.in(x, "x"));
    return s.finish();
  }
  cpu::check_f32(x, "gelu_forward", "x");
  cpu::check_f32(y, "gelu_forward", "y");
  check_shape(y, x.shape(), "gelu_forward y");
  const int64_t n = x.numel();
  const float* xp = x.f32();  // x: any shape, n elements
  float* yp = y.f32();        // y: same shape as x; may be x itself
#pragma omp parallel for schedule(static)
  for (int64_t s = 0; s < n; s += kSpan) gelu_forward_span(yp + s, xp + s, std::min(kSpan, n - s));
}

void gelu_backward(ExecContext& ctx, Tensor& dx, const Tensor& dy, const Tensor& x) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Activation);
  if (any_low_precision({&dx, &dy, &x})) {  // bf16/f16 storage: f32 arithmetic on staged copies
    F32Staging s(ctx, "gelu_backward");
    Tensor dx32 = s.out(dx, "dx");
    cpu::gelu_backward(ctx, dx32, s.in(dy, "dy"), s.in(x, "x"));
    return s.finish();
  }
  cpu::check_f32(x, "gelu_backward", "x");
  cpu::check_f32(dy, "gelu_backward", "dy");
  cpu::check_f32(dx, "gelu_backward", "dx");
  check_shape(dy, x.shape(), "gelu_backward dy");
  check_shape(dx, x.shape(), "gelu_backward dx");
  const int64_t n = x.numel();
  const float* xp = x.f32();
  const float* dyp = dy.f32();  // may be dx itself
  float* dxp = dx.f32();
#pragma omp parallel for schedule(static)
  for (int64_t s = 0; s < n; s += kSpan)
    gelu_backward_span(dxp + s, dyp + s, xp + s, std::min(kSpan, n - s));
}

void swiglu_forward(ExecContext& ctx, Tensor& y, const Tensor& gate, const Tensor& up) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Activation);
  if (any_low_precision({&y, &gate, &up})) {  // bf16/f16 storage: f32 arithmetic on staged copies
    F32Staging s(ctx, "swiglu_forward");
    Tensor y32 = s.out(y, "y");
    cpu::swiglu_forward(ctx, y32, s.in(gate, "gate"), s.in(up, "up"));
    return s.finish();
  }
  cpu::check_f32(gate, "swiglu_forward", "gate");
  cpu::check_f32(up, "swiglu_forward", "up");
  cpu::check_f32(y, "swiglu_forward", "y");
  BRAID_CHECK(gate.ndim() == 2, "swiglu_forward: gate must be (N, F), got {}", gate.str());
  check_shape(up, gate.shape(), "swiglu_forward up");
  check_shape(y, gate.shape(), "swiglu_forward y");
  const int64_t n = gate.numel();
  const float* g = gate.f32();  // gate: (N, F)
  const float* u = up.f32();    // up: (N, F)
  float* yp = y.f32();          // y: (N, F)
#pragma omp parallel for schedule(static)
  for (int64_t s = 0; s < n; s += kSpan)
    swiglu_forward_span(yp + s, g + s, u + s, std::min(kSpan, n - s));
}

void swiglu_backward(ExecContext& ctx, Tensor& dgate, Tensor& dup, const Tensor& dy,
                     const Tensor& gate, const Tensor& up) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Activation);
  if (any_low_precision(
          {&dgate, &dup, &dy, &gate, &up})) {  // bf16/f16 storage: f32 arithmetic on staged copies
    F32Staging s(ctx, "swiglu_backward");
    Tensor dg32 = s.out(dgate, "dgate"), du32 = s.out(dup, "dup");
    cpu::swiglu_backward(ctx, dg32, du32, s.in(dy, "dy"), s.in(gate, "gate"), s.in(up, "up"));
    return s.finish();
  }
  cpu::check_f32(gate, "swiglu_backward", "gate");
  cpu::check_f32(up, "swiglu_backward", "up");
  cpu::check_f32(dy, "swiglu_backward", "dy");
  cpu::check_f32(dgate, "swiglu_backward", "dgate");
  cpu::check_f32(dup, "swiglu_backward", "dup");
  BRAID_CHECK(gate.ndim() == 2, "swiglu_backward: gate must be (N, F), got {}", gate.str());
  check_shape(up, gate.shape(), "swiglu_backward up");
  check_shape(dy, gate.shape(), "swiglu_backward dy");
  check_shape(dgate, gate.shape(), "swiglu_backward dgate");
  check_shape(dup, gate.shape(), "swiglu_backward dup");
  BRAID_CHECK(dgate.raw() != dup.raw(), "swiglu_backward: dgate and dup must be different tensors");
  const int64_t n = gate.numel();
  const float* g = gate.f32();  // gate: (N, F)
  const float* u = up.f32();    // up: (N, F)
  const float* d = dy.f32();    // dy: (N, F)
  float* dg = dgate.f32();      // dgate: (N, F)
  float* du = dup.f32();        // dup: (N, F)
#pragma omp parallel for schedule(static)
  for (int64_t s = 0; s < n; s += kSpan)
    swiglu_backward_span(dg + s, du + s, d + s, g + s, u + s, std::min(kSpan, n - s));
}

}  // namespace cpu
}  // namespace braid
