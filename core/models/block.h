// One transformer block: pre-norm attention and MLP with residual connections. Slots (HF
// names): llama input_layernorm, self_attn, post_attention_layernorm, mlp; gpt2 ln_1, attn,
// ln_2, mlp.
#pragma once

#include <memory>

#include "core/models/attention.h"
#include "core/models/mlp.h"

namespace braid {

class Block : public Module {
 public:
  Block(ExecContext& ctx, const ModelConfig& cfg, int layer);
  // h = x + attn(norm1(x)); y = h + mlp(norm2(h)).  x, y: (B, T, C)
  Tensor forward(const Tensor& x, MicroBatch& mb) override;
  Tensor backward(const Tensor& dy, MicroBatch& mb) override;
  Tensor infer(const Tensor& x, InferState& st) override;

 private:
  Module& norm1() const { return child(0); }
  Module& attn() const { return child(1); }
  Module& norm2() const { return child(2); }
  Module& mlp() const { return child(3); }
};

// "model.layers.3" / "transformer.h.3": the path of block `layer`.
std::string block_path(const ModelConfig& cfg, int layer);

}  // namespace braid
