// One transformer block: pre-norm attention and MLP with residual connections.
#pragma once

#include <memory>

#include "core/models/attention.h"
#include "core/models/mlp.h"

namespace braid {

class Block : public Module {
 public:
  Block(const ModelConfig& cfg, int layer);
  // h = x + attn(norm1(x)); y = h + mlp(norm2(h)).  x, y: (B, T, C)
  Tensor forward(const Tensor& x, Saved& saved) override;
  Tensor backward(const Tensor& dy, Saved& saved) override;
  void collect_parameters(std::vector<Parameter*>& out) override;
  Tensor infer(const Tensor& x, KVCache::Layer& cache, int64_t pos);

  std::unique_ptr<Norm> norm1, norm2;  // LayerNorm (gpt2) or RMSNorm (llama)
  std::unique_ptr<SelfAttention> attn;
  std::unique_ptr<MLP> mlp;
};

}  // namespace braid
