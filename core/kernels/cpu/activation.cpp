// CPU GELU (tanh form) and SwiGLU, forward and backward: OpenMP over spans, SIMD within.
// The exp clamps in fast_math.h only if-convert (and so vectorise) when float compares are not
// treated as trapping; nothing in braid reads the floating-point exception flags.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif

#include "core/kernels/math/activation.h"

#include <algorithm>
#include <utility>

#include "core/kernels/cpu/cpu_checks.h"
#include "core/kernels/cpu/cpu_kernels.h"
#include "core/kernels/cpu/fast_math.h"
#include "core/kernels/cpu/lowp.h"
#include "core/profile.h"

namespace braid {

namespace {

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

// d may be x (y may not).
BRAID_CPU_CLONES void gelu_with_derivative_span(float* y, float* d, const float* x, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) math::gelu_with_derivative(x[i], y[i], d[i]);
}

// dx = dy * d; dx may be dy.
BRAID_CPU_CLONES void mul_span(float* dx, const float* dy, const float* d, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * d[i];
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
  const char* op = "gelu_forward";
  cpu::check_cpu(x, op, "x");
  cpu::check_cpu(y, op, "y");
  cpu::check_float_storage(x, op, "x");
  cpu::check_float_storage(y, op, "y");
  check_shape(y, x.shape(), "gelu_forward y");
  // x: any shape; y: the same shape, and may be x itself. 16-bit spans are converted in place.
  const TileIo io(ctx);
  parallel_spans(ctx, x.numel(), kSpan, 2, any_low_precision({&y, &x}),
                 [&](int64_t s, int64_t len, float* buf) {
                   const float* xs = io.in(x, s, len, buf);
                   float* ys = io.out(y, s, buf + kSpan);
                   gelu_forward_span(ys, xs, len);
                   io.store(y, s, len, ys);
                 });
}

void gelu_backward(ExecContext& ctx, Tensor& dx, const Tensor& dy, const Tensor& x) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Activation);
  const char* op = "gelu_backward";
  cpu::check_float_args(op, {{&x, "x"}, {&dy, "dy"}, {&dx, "dx"}});
  check_shape(dy, x.shape(), "gelu_backward dy");
  check_shape(dx, x.shape(), "gelu_backward dx");
  // dy may be dx itself.
  const TileIo io(ctx);
  parallel_spans(ctx, x.numel(), kSpan, 3, any_low_precision({&dx, &dy, &x}),
                 [&](int64_t s, int64_t len, float* buf) {
                   const float* xs = io.in(x, s, len, buf);
                   const float* dys = io.in(dy, s, len, buf + kSpan);
                   float* dxs = io.out(dx, s, buf + 2 * kSpan);
                   gelu_backward_span(dxs, dys, xs, len);
                   io.store(dx, s, len, dxs);
                 });
}

void gelu_forward_with_derivative(ExecContext& ctx, Tensor& y, Tensor& dydx, const Tensor& x) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Activation);
  const char* op = "gelu_forward_with_derivative";
  cpu::check_float_args(op, {{&x, "x"}, {&y, "y"}, {&dydx, "dydx"}});
  check_shape(y, x.shape(), "gelu_forward_with_derivative y");
  check_shape(dydx, x.shape(), "gelu_forward_with_derivative dydx");
  BRAID_CHECK(y.raw() != x.raw() && y.raw() != dydx.raw(),
              "gelu_forward_with_derivative: y must not share memory with x or dydx");
  // x: any shape; y, dydx: the same shape; dydx may be x itself (16-bit spans are widened
  // before anything is stored).
  const TileIo io(ctx);
  parallel_spans(ctx, x.numel(), kSpan, 3, any_low_precision({&y, &dydx, &x}),
                 [&](int64_t s, int64_t len, float* buf) {
                   const float* xs = io.in(x, s, len, buf);
                   float* ys = io.out(y, s, buf + kSpan);
                   float* ds = io.out(dydx, s, buf + 2 * kSpan);
                   gelu_with_derivative_span(ys, ds, xs, len);
                   io.store(y, s, len, ys);
                   io.store(dydx, s, len, ds);
                 });
}

void gelu_backward_with_derivative(ExecContext& ctx, Tensor& dx, const Tensor& dy,
                                   const Tensor& dydx) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Activation);
  const char* op = "gelu_backward_with_derivative";
  cpu::check_float_args(op, {{&dydx, "dydx"}, {&dy, "dy"}, {&dx, "dx"}});
  check_shape(dy, dydx.shape(), "gelu_backward_with_derivative dy");
  check_shape(dx, dydx.shape(), "gelu_backward_with_derivative dx");
  // dx may be dy or dydx.
  const TileIo io(ctx);
  parallel_spans(ctx, dydx.numel(), kSpan, 3, any_low_precision({&dx, &dy, &dydx}),
                 [&](int64_t s, int64_t len, float* buf) {
                   const float* ds = io.in(dydx, s, len, buf);
                   const float* dys = io.in(dy, s, len, buf + kSpan);
                   float* dxs = io.out(dx, s, buf + 2 * kSpan);
                   mul_span(dxs, dys, ds, len);
                   io.store(dx, s, len, dxs);
                 });
}

void swiglu_forward(ExecContext& ctx, Tensor& y, const Tensor& gate, const Tensor& up) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Activation);
  const char* op = "swiglu_forward";
  cpu::check_float_args(op, {{&gate, "gate"}, {&up, "up"}, {&y, "y"}});
  BRAID_CHECK(gate.ndim() == 2, "swiglu_forward: gate must be (N, F), got {}", gate.str());
  check_shape(up, gate.shape(), "swiglu_forward up");
  check_shape(y, gate.shape(), "swiglu_forward y");
  // gate, up, y: (N, F)
  const TileIo io(ctx);
  parallel_spans(ctx, gate.numel(), kSpan, 3, any_low_precision({&y, &gate, &up}),
                 [&](int64_t s, int64_t len, float* buf) {
                   const float* g = io.in(gate, s, len, buf);
                   const float* u = io.in(up, s, len, buf + kSpan);
                   float* ys = io.out(y, s, buf + 2 * kSpan);
                   swiglu_forward_span(ys, g, u, len);
                   io.store(y, s, len, ys);
                 });
}

void swiglu_backward(ExecContext& ctx, Tensor& dgate, Tensor& dup, const Tensor& dy,
                     const Tensor& gate, const Tensor& up) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Activation);
  const char* op = "swiglu_backward";
  cpu::check_float_args(
      op, {{&gate, "gate"}, {&up, "up"}, {&dy, "dy"}, {&dgate, "dgate"}, {&dup, "dup"}});
  BRAID_CHECK(gate.ndim() == 2, "swiglu_backward: gate must be (N, F), got {}", gate.str());
  check_shape(up, gate.shape(), "swiglu_backward up");
  check_shape(dy, gate.shape(), "swiglu_backward dy");
  check_shape(dgate, gate.shape(), "swiglu_backward dgate");
  check_shape(dup, gate.shape(), "swiglu_backward dup");
  BRAID_CHECK(dgate.raw() != dup.raw(), "swiglu_backward: dgate and dup must be different tensors");
  // gate, up, dy, dgate, dup: (N, F); dy may be dgate or dup.
  const TileIo io(ctx);
  parallel_spans(ctx, gate.numel(), kSpan, 5, any_low_precision({&dgate, &dup, &dy, &gate, &up}),
                 [&](int64_t s, int64_t len, float* buf) {
                   const float* g = io.in(gate, s, len, buf);
                   const float* u = io.in(up, s, len, buf + kSpan);
                   const float* d = io.in(dy, s, len, buf + 2 * kSpan);
                   float* dg = io.out(dgate, s, buf + 3 * kSpan);
                   float* du = io.out(dup, s, buf + 4 * kSpan);
                   swiglu_backward_span(dg, du, d, g, u, len);
                   io.store(dgate, s, len, dg);
                   io.store(dup, s, len, du);
                 });
}

}  // namespace cpu
}  // namespace braid
