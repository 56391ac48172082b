// CUDA GELU and SwiGLU (core/kernels/activation.h) on the context's stream: argument checks,
// then the launchers of activation.cu.
#include "core/kernels/cuda/activation.h"
#include "core/kernels/cuda/cuda_kernels.h"
#include "core/kernels/cuda/ops_util.h"
#include "core/profile.h"

namespace braid::cuda {

void gelu_forward(ExecContext& ctx, Tensor& y, const Tensor& x) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Activation);
  check_float(x, "gelu_forward", "x");
  check_float(y, "gelu_forward", "y");
  check_shape(y, x.shape(), "gelu_forward y");
  launch_gelu_forward(stream_of(ctx), y.raw(), code(y), x.raw(), code(x), x.numel());
  check_launch("gelu_forward");
}

void gelu_backward(ExecContext& ctx, Tensor& dx, const Tensor& dy, const Tensor& x) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Activation);
  check_float(x, "gelu_backward", "x");
  check_float(dy, "gelu_backward", "dy");
  check_float(dx, "gelu_backward", "dx");
  check_shape(dy, x.shape(), "gelu_backward dy");
  check_shape(dx, x.shape(), "gelu_backward dx");
  launch_gelu_backward(stream_of(ctx), dx.raw(), code(dx), dy.raw(), code(dy), x.raw(), code(x),
                       x.numel());
  check_launch("gelu_backward");
}

void gelu_forward_with_derivative(ExecContext& ctx, Tensor& y, Tensor& dydx, const Tensor& x) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Activation);
  const char* op = "gelu_forward_with_derivative";
  check_float(x, op, "x");
  check_float(y, op, "y");
  check_float(dydx, op, "dydx");
  check_shape(y, x.shape(), "gelu_forward_with_derivative y");
  check_shape(dydx, x.shape(), "gelu_forward_with_derivative dydx");
  BRAID_CHECK(y.raw() != x.raw() && y.raw() != dydx.raw(),
              "gelu_forward_with_derivative: y must not share memory with x or dydx");
  launch_gelu_with_derivative(stream_of(ctx), y.raw(), code(y), dydx.raw(), code(dydx), x.raw(),
                              code(x), x.numel());
  check_launch(op);
}

void gelu_backward_with_derivative(ExecContext& ctx, Tensor& dx, const Tensor& dy,
                                   const Tensor& dydx) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Activation);
  const char* op = "gelu_backward_with_derivative";
  check_float(dydx, op, "dydx");
  check_float(dy, op, "dy");
  check_float(dx, op, "dx");
  check_shape(dy, dydx.shape(), "gelu_backward_with_derivative dy");
  check_shape(dx, dydx.shape(), "gelu_backward_with_derivative dx");
  launch_mul(stream_of(ctx), dx.raw(), code(dx), dy.raw(), code(dy), dydx.raw(), code(dydx),
             dydx.numel());
  check_launch(op);
}

void swiglu_forward(ExecContext& ctx, Tensor& y, const Tensor& gate, const Tensor& up) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Activation);
  check_float(gate, "swiglu_forward", "gate");
  check_float(up, "swiglu_forward", "up");
  check_float(y, "swiglu_forward", "y");
  BRAID_CHECK(gate.ndim() == 2, "swiglu_forward: gate must be (N, F), got {}", gate.str());
  check_shape(up, gate.shape(), "swiglu_forward up");
  check_shape(y, gate.shape(), "swiglu_forward y");
  launch_swiglu_forward(stream_of(ctx), y.raw(), code(y), gate.raw(), code(gate), up.raw(),
                        code(up), gate.numel());
  check_launch("swiglu_forward");
}

void swiglu_backward(ExecContext& ctx, Tensor& dgate, Tensor& dup, const Tensor& dy,
                     const Tensor& gate, const Tensor& up) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Activation);
  check_float(gate, "swiglu_backward", "gate");
  check_float(up, "swiglu_backward", "up");
  check_float(dy, "swiglu_backward", "dy");
  check_float(dgate, "swiglu_backward", "dgate");
  check_float(dup, "swiglu_backward", "dup");
  BRAID_CHECK(gate.ndim() == 2, "swiglu_backward: gate must be (N, F), got {}", gate.str());
  check_shape(up, gate.shape(), "swiglu_backward up");
  check_shape(dy, gate.shape(), "swiglu_backward dy");
  check_shape(dgate, gate.shape(), "swiglu_backward dgate");
  check_shape(dup, gate.shape(), "swiglu_backward dup");
  BRAID_CHECK(dgate.raw() != dup.raw(), "swiglu_backward: dgate and dup must be different tensors");
  launch_swiglu_backward(stream_of(ctx), dgate.raw(), code(dgate), dup.raw(), code(dup), dy.raw(),
                         code(dy), gate.raw(), code(gate), up.raw(), code(up), gate.numel());
  check_launch("swiglu_backward");
}

}  // namespace braid::cuda
