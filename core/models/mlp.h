// Feed-forward blocks: GPT-2 (c_fc, GELU, c_proj) and Llama (SwiGLU: gate, up, down).
#pragma once

#include <memory>

#include "core/model_config.h"
#include "core/models/layers.h"

namespace braid {

class MLP : public Module {
 public:
  // prefix: "transformer.h.3.mlp" or "model.layers.3.mlp"
  MLP(const ModelConfig& cfg, const std::string& prefix);
  Tensor forward(const Tensor& x, Saved& saved) override;  // (B, T, C) -> (B, T, C)
  Tensor backward(const Tensor& dy, Saved& saved) override;
  void collect_parameters(std::vector<Parameter*>& out) override;
  Tensor infer(const Tensor& x);

  std::unique_ptr<Linear> c_fc, c_proj;                 // gpt2
  std::unique_ptr<Linear> gate_proj, up_proj, down_proj;  // llama

 private:
  bool llama_;
};

}  // namespace braid
