// QuantizedLinear: a frozen Linear whose weight is held only block-wise quantised (QLoRA's base
// layer, core/kernels/quantize.h). It owns no trainable parameter: the forward and the input
// gradient dequantise tiles of the weight into the GEMM, and there is no weight gradient.
// Made from a Linear placed for tensor parallelism, it quantises this rank's part of the weight
// in its own blocks and takes over the Linear's output region (a row-parallel partial sum).
#pragma once

#include <memory>

#include "core/kernels/quantize.h"
#include "core/models/layers.h"

namespace braid {

class QuantizedLinear final : public Module {
 public:
  // Quantises `from`'s weight (f32 or bf16; its local part when placed) and takes its bias and
  // output region; the full-precision weight goes with `from` (released when it is destroyed).
  QuantizedLinear(ExecContext& ctx, Linear& from, QuantCode code, int64_t block, bool double_quant);

  Tensor forward(const Tensor& x, MicroBatch& mb) override;  // x: (..., in) -> (..., out)
  Tensor backward(const Tensor& dy, MicroBatch& mb) override;
  Tensor infer(const Tensor& x, InferState& st) override;
  void own_parameters(std::vector<Parameter*>& out) override;

  int64_t in_features() const { return weight.shape[1]; }
  int64_t out_features() const { return weight.shape[0]; }

  QuantizedWeight weight;           // (out, in), quantised
  std::unique_ptr<Parameter> bias;  // frozen; null when the layer has none

 private:
  // x W^T (+ b): in x's dtype, or the f32 partial sum when the output is reduced.
  Tensor product(ExecContext& ctx, const Tensor& x) const;
  Module* region_ = nullptr;  // the output_region slot, when reduced
  bool bias_in_partial_ = true;
};

}  // namespace braid
