// QuantizedLinear forward/backward (core/models/quantized_linear.h).
#include "core/models/quantized_linear.h"

#include <utility>

namespace braid {

namespace {
Shape with_last(const Shape& s, int64_t last) {
  Shape r = s;
  r.back() = last;
  return r;
}
}  // namespace

QuantizedLinear::QuantizedLinear(ExecContext& ctx, Linear& from, QuantCode code, int64_t block,
                                 bool double_quant)
    : Module(from.path()) {
  BRAID_CHECK(!from.reduces_output() && !from.weight.shard.sharded(),
              "{}: a quantised base is not tensor-parallel yet", from.path());
  weight = quantize_weight(ctx, from.weight.value, code, block, double_quant);
  bias = std::move(from.bias);
  if (bias) bias->freeze();
}

Tensor QuantizedLinear::product(ExecContext& ctx, const Tensor& x) const {
  Tensor y = x.new_empty(with_last(x.shape(), out_features()), x.dtype());
  Tensor y2 = as_rows(y);
  linear_forward_quantized(ctx, y2, as_rows(x), weight, bias ? bias->value : Tensor());
  return y;
}

Tensor QuantizedLinear::forward(const Tensor& x, MicroBatch& mb) {
  mb.push(x);  // only its shape and dtype are needed: the input gradient is dy W
  return product(mb.ctx(), x);
}

Tensor QuantizedLinear::infer(const Tensor& x, InferState& st) { return product(st.ctx, x); }

Tensor QuantizedLinear::backward(const Tensor& dy, MicroBatch& mb) {
  const Tensor x = mb.pop();
  Tensor dx = empty_like(x);
  Tensor dx2 = as_rows(dx);
  linear_backward_input_quantized(mb.ctx(), dx2, as_rows(dy), weight);
  return dx;
}

void QuantizedLinear::own_parameters(std::vector<Parameter*>& out) {
  if (bias) out.push_back(bias.get());
}

}  // namespace braid
