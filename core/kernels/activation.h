// Pointwise activations: GELU (tanh form) and SwiGLU (forward and backward).
#pragma once

#include "core/context.h"

namespace braid {

// y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); any shape, y may alias x.
void gelu_forward(ExecContext& ctx, Tensor& y, const Tensor& x);
// dx = dy * gelu'(x), overwritten; dx may alias dy.
void gelu_backward(ExecContext& ctx, Tensor& dx, const Tensor& dy, const Tensor& x);
// Training's pair: y = gelu(x) and dydx = gelu'(x) from one exp per element (dydx may alias x,
// y may not; same bits as gelu_forward's y and as gelu_backward's factor), then
// dx = dy * dydx (dx may alias dy or dydx), a multiply instead of a second exp.
void gelu_forward_with_derivative(ExecContext& ctx, Tensor& y, Tensor& dydx, const Tensor& x);
void gelu_backward_with_derivative(ExecContext& ctx, Tensor& dx, const Tensor& dy,
                                   const Tensor& dydx);

// y = silu(gate) * up, all (N, F).
void swiglu_forward(ExecContext& ctx, Tensor& y, const Tensor& gate, const Tensor& up);
// dgate, dup (N, F) overwritten.
void swiglu_backward(ExecContext& ctx, Tensor& dgate, Tensor& dup, const Tensor& dy,
                     const Tensor& gate, const Tensor& up);

}  // namespace braid
