// GELU and SwiGLU slots: the activation kernels with their stash.
#include "core/models/activation_fn.h"

#include "core/kernels/activation.h"
#include "core/models/layers.h"

namespace braid {

Tensor Gelu::apply(ExecContext& ctx, const Tensor& a, const Tensor& /*b*/) {
  Tensor y = empty_like(a);
  gelu_forward(ctx, y, a);
  return y;
}

Tensor Gelu::forward2(const Tensor& a, const Tensor& b, MicroBatch& mb) {
  if (keeps_inputs()) {
    Tensor y = apply(mb.ctx(), a, b);
    mb.push(a);
    return y;
  }
  Tensor y = empty_like(a);
  Tensor d = a;  // a's memory becomes gelu'(a): nothing reads a after this layer's forward
  gelu_forward_with_derivative(mb.ctx(), y, d, a);
  mb.push(d);
  return y;
}

Tensor Gelu::backward2(const Tensor& dy, MicroBatch& mb, Tensor* /*db*/) {
  Tensor kept = mb.pop();  // a, or gelu'(a)
  Tensor da = dy;          // in place: dy's memory becomes da
  if (keeps_inputs())
    gelu_backward(mb.ctx(), da, dy, kept);
  else
    gelu_backward_with_derivative(mb.ctx(), da, dy, kept);
  return da;
}

Tensor SwiGlu::apply(ExecContext& ctx, const Tensor& gate, const Tensor& up) {
  BRAID_CHECK(up.defined(), "{}: SwiGLU needs gate and up", path());
  Tensor y = empty_like(gate);
  Tensor y2 = as_rows(y);
  swiglu_forward(ctx, y2, as_rows(gate), as_rows(up));
  return y;
}

Tensor SwiGlu::forward2(const Tensor& gate, const Tensor& up, MicroBatch& mb) {
  Tensor y = apply(mb.ctx(), gate, up);
  mb.push(gate);
  mb.push(up);
  return y;
}

Tensor SwiGlu::backward2(const Tensor& dy, MicroBatch& mb, Tensor* dup_out) {
  BRAID_CHECK(dup_out, "{}: SwiGLU backward returns two gradients", path());
  Tensor up = mb.pop(), gate = mb.pop();
  Tensor dgate = empty_like(gate), dup = empty_like(up);
  Tensor dgate2 = as_rows(dgate), dup2 = as_rows(dup);
  swiglu_backward(mb.ctx(), dgate2, dup2, as_rows(dy), as_rows(gate), as_rows(up));
  *dup_out = dup;
  return dgate;
}

}  // namespace braid
