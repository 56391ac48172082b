// QuantizedLinear forward/backward (core/models/quantized_linear.h).
#include "core/models/quantized_linear.h"

#include <utility>

namespace braid {

QuantizedLinear::QuantizedLinear(ExecContext& ctx, Linear& from, QuantCode code, int64_t block,
                                 bool double_quant)
    : Module(from.path()) {
  weight = quantize_weight(ctx, from.weight.value, code, block, double_quant);
  bias = std::move(from.bias);
  if (bias) bias->freeze();
  if (std::unique_ptr<Module> region = from.take_output_region(&bias_in_partial_))
    region_ = &child(add_slot("output_region", std::move(region)));
}

Tensor QuantizedLinear::product(ExecContext& ctx, const Tensor& x) const {
  Tensor y = x.new_empty(with_last(x.shape(), out_features()), region_ ? DType::F32 : x.dtype());
  Tensor y2 = as_rows(y);
  const bool with_bias = bias && (!region_ || bias_in_partial_);
  linear_forward_quantized(ctx, y2, as_rows(x), weight, with_bias ? bias->value : Tensor());
  return y;
}

Tensor QuantizedLinear::forward(const Tensor& x, MicroBatch& mb) {
  mb.push(x);  // only its shape and dtype are needed: the input gradient is dy W
  Tensor y = product(mb.ctx(), x);
  if (!region_) return y;
  return rounded(mb.ctx(), region_->forward(y, mb), x.dtype());
}

Tensor QuantizedLinear::infer(const Tensor& x, InferState& st) {
  Tensor y = product(st.ctx, x);
  if (!region_) return y;
  return rounded(st.ctx, region_->infer(y, st), x.dtype());
}

Tensor QuantizedLinear::backward(const Tensor& dy_in, MicroBatch& mb) {
  // The region's backward first: it pops what its forward pushed after x.
  const Tensor dy = region_ ? region_->backward(dy_in, mb) : dy_in;
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
