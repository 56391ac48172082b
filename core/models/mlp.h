// Feed-forward blocks: GPT-2 (c_fc, GELU, c_proj) and Llama (SwiGLU: gate, up, down), with the
// projections and the activation function as child slots (the activation last, so the
// projections keep their slot indices). The hidden size is the projections' (a placement
// keeping some of their columns runs the same code, tensor parallelism), and such a
// placement gives the module an input region (set_input_region), as SelfAttention.
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

  // Runs `region` on the input before the projections and on the input gradient after them,
  // in the slot `input_region` (after the activation's). Once per module.
  void set_input_region(std::unique_ptr<Module> region);

 private:
  ActivationFn& act() const;
  bool llama_;
  Module* region_ = nullptr;
};

}  // namespace braid
