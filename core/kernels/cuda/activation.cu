// Pointwise activations: GELU (tanh form) and SwiGLU, forward and backward.
// Buffers: contiguous, n elements each, any of f32/bf16/f16 per argument; the per-element math
// is the CPU kernels' (core/kernels/math/activation.h), in f32, rounded to nearest even on store.
// In-place use (y = x, dx = dy, the derivative over x) is allowed: each element is read
// before it is written by the same thread.
#include "core/kernels/cuda/activation.h"
#include "core/kernels/cuda/any_dtype.cuh"
#include "core/kernels/math/activation.h"

namespace braid::cuda {

namespace {

__global__ void gelu_forward_kernel(AnyPtr y, AnyConstPtr x, int64_t n) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) y.set(i, math::gelu(x[i]));
}

__global__ void gelu_backward_kernel(AnyPtr dx, AnyConstPtr dy, AnyConstPtr x, int64_t n) {
  for (int64_t i = global_thread(); i < n; i += grid_threads())
    dx.set(i, math::gelu_grad(dy[i], x[i]));
}

__global__ void gelu_with_derivative_kernel(AnyPtr y, AnyPtr d, AnyConstPtr x, int64_t n) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    float yi, di;
    math::gelu_with_derivative(x[i], yi, di);
    y.set(i, yi);
    d.set(i, di);
  }
}

__global__ void mul_kernel(AnyPtr dx, AnyConstPtr dy, AnyConstPtr d, int64_t n) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) dx.set(i, dy[i] * d[i]);
}

__global__ void swiglu_forward_kernel(AnyPtr y, AnyConstPtr gate, AnyConstPtr up, int64_t n) {
  for (int64_t i = global_thread(); i < n; i += grid_threads())
    y.set(i, math::swiglu(gate[i], up[i]));
}

__global__ void swiglu_backward_kernel(AnyPtr dgate, AnyPtr dup, AnyConstPtr dy, AnyConstPtr gate,
                                       AnyConstPtr up, int64_t n) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    float dg, du;
    math::swiglu_grad(dy[i], gate[i], up[i], dg, du);
    dgate.set(i, dg);
    dup.set(i, du);
  }
}

}  // namespace

void launch_gelu_forward(void* stream, void* y, int ty, const void* x, int tx, int64_t n) {
  if (n == 0) return;
  gelu_forward_kernel<<<grid_for(n, kThreads), kThreads, 0, as_stream(stream)>>>({y, ty}, {x, tx},
                                                                                 n);
}

void launch_gelu_backward(void* stream, void* dx, int tdx, const void* dy, int tdy, const void* x,
                          int tx, int64_t n) {
  if (n == 0) return;
  gelu_backward_kernel<<<grid_for(n, kThreads), kThreads, 0, as_stream(stream)>>>(
      {dx, tdx}, {dy, tdy}, {x, tx}, n);
}

void launch_gelu_with_derivative(void* stream, void* y, int ty, void* d, int td, const void* x,
                                 int tx, int64_t n) {
  if (n == 0) return;
  gelu_with_derivative_kernel<<<grid_for(n, kThreads), kThreads, 0, as_stream(stream)>>>(
      {y, ty}, {d, td}, {x, tx}, n);
}

void launch_mul(void* stream, void* dx, int tdx, const void* dy, int tdy, const void* d, int td,
                int64_t n) {
  if (n == 0) return;
  mul_kernel<<<grid_for(n, kThreads), kThreads, 0, as_stream(stream)>>>({dx, tdx}, {dy, tdy},
                                                                          {d, td}, n);
}

void launch_swiglu_forward(void* stream, void* y, int ty, const void* gate, int tg, const void* up,
                           int tu, int64_t n) {
  if (n == 0) return;
  swiglu_forward_kernel<<<grid_for(n, kThreads), kThreads, 0, as_stream(stream)>>>(
      {y, ty}, {gate, tg}, {up, tu}, n);
}

void launch_swiglu_backward(void* stream, void* dgate, int tdg, void* dup, int tdu, const void* dy,
                            int tdy, const void* gate, int tg, const void* up, int tu, int64_t n) {
  if (n == 0) return;
  swiglu_backward_kernel<<<grid_for(n, kThreads), kThreads, 0, as_stream(stream)>>>(
      {dgate, tdg}, {dup, tdu}, {dy, tdy}, {gate, tg}, {up, tu}, n);
}

}  // namespace braid::cuda
