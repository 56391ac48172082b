// Feed-forward blocks: GPT-2 (c_fc, GELU, c_proj) and Llama (SwiGLU: gate, up, down), with the
// projections and the activation function as child slots (the activation last, so the
// projections keep their slot indices).
#pragma once

#include <memory>

#include "core/model_config.h"
#include "core/models/activation_fn.h"
#include "core/models/layers.h"

namespace braid {

class MLP : public Module {
 public:
  // path: "transformer.h.3.mlp" or "model.layers.3.mlp"
  MLP(ExecContext& ctx, const ModelConfig& cfg, const std::string& path);
  Tensor forward(const Tensor& x, MicroBatch& mb) override;  // (B, T, C) -> (B, T, C)
  Tensor backward(const Tensor& dy, MicroBatch& mb) override;
  Tensor infer(const Tensor& x, InferState& st) override;

 private:
  ActivationFn& act() const;
  bool llama_;
};

}  // namespace braid
