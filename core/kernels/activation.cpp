// activation: argument checks and device dispatch of the public kernels
// (core/kernels/activation.h).
#include "core/kernels/activation.h"

#include "core/kernels/cpu/cpu_kernels.h"
#include "core/kernels/cuda/cuda_kernels.h"
#include "core/kernels/dispatch.h"

namespace braid {

void gelu_forward(ExecContext& ctx, Tensor& y, const Tensor& x) {
  KernelArgs args(ctx, "gelu_forward", {{&y, "y"}, {&x, "x"}});
  BRAID_DISPATCH(args, gelu_forward, ctx, y, x);
}

void gelu_backward(ExecContext& ctx, Tensor& dx, const Tensor& dy, const Tensor& x) {
  KernelArgs args(ctx, "gelu_backward", {{&dx, "dx"}, {&dy, "dy"}, {&x, "x"}});
  BRAID_DISPATCH(args, gelu_backward, ctx, dx, dy, x);
}

void gelu_forward_with_derivative(ExecContext& ctx, Tensor& y, Tensor& dydx, const Tensor& x) {
  KernelArgs args(ctx, "gelu_forward_with_derivative", {{&y, "y"}, {&dydx, "dydx"}, {&x, "x"}});
  BRAID_DISPATCH(args, gelu_forward_with_derivative, ctx, y, dydx, x);
}

void gelu_backward_with_derivative(ExecContext& ctx, Tensor& dx, const Tensor& dy,
                                   const Tensor& dydx) {
  KernelArgs args(ctx, "gelu_backward_with_derivative",
                  {{&dx, "dx"}, {&dy, "dy"}, {&dydx, "dydx"}});
  BRAID_DISPATCH(args, gelu_backward_with_derivative, ctx, dx, dy, dydx);
}

void swiglu_forward(ExecContext& ctx, Tensor& y, const Tensor& gate, const Tensor& up) {
  KernelArgs args(ctx, "swiglu_forward", {{&y, "y"}, {&gate, "gate"}, {&up, "up"}});
  BRAID_DISPATCH(args, swiglu_forward, ctx, y, gate, up);
}

void swiglu_backward(ExecContext& ctx, Tensor& dgate, Tensor& dup, const Tensor& dy,
                     const Tensor& gate, const Tensor& up) {
  KernelArgs args(ctx, "swiglu_backward",
                  {{&dgate, "dgate"}, {&dup, "dup"}, {&dy, "dy"}, {&gate, "gate"}, {&up, "up"}});
  BRAID_DISPATCH(args, swiglu_backward, ctx, dgate, dup, dy, gate, up);
}

}  // namespace braid
