// Transformer: a GPT-2- or Llama-family language model built from one ModelConfig.
// It knows nothing of parallelism; a pipeline stage builds it from a range of blocks.
#pragma once

#include <memory>
#include <vector>

#include "core/model_config.h"
#include "core/models/block.h"

namespace braid {

// Blocks [first, last) of the model; the embedding lives with block 0 and the final norm and
// LM head with the last block. The default is the whole model.
struct BlockRange {
  int first = 0;
  int last = -1;  // -1: n_layer
};

// Sum of per-token losses and how many tokens counted (targets of -1 are ignored).
struct LossSum {
  double sum = 0.0;
  int64_t count = 0;
};

class Transformer {
 public:
  explicit Transformer(const ModelConfig& cfg, BlockRange range = {});

  const ModelConfig& config() const { return cfg_; }
  // Every parameter once (the tied LM head is the token embedding), in HF order.
  const std::vector<Parameter*>& parameters() const { return params_; }
  Parameter* find(const std::string& name) const;  // null when absent

  // GPT-2-style seeded init: N(0, init_std), residual output projections scaled by
  // 1/sqrt(2 * n_layer), biases 0, norm weights 1. Each tensor's values depend only on
  // (seed, its name), not on construction order or layout.
  void init_weights();
  void zero_grad();

  // One micro-batch forward and backward. tokens, targets: (B, T) i32. Parameter gradients
  // accumulate grad_scale * d(sum of token losses); returns the loss sum of this micro-batch.
  LossSum forward_backward(const Tensor& tokens, const Tensor& targets, float grad_scale);
  // Loss only (evaluation): no gradients, nothing kept.
  LossSum forward_loss(const Tensor& tokens, const Tensor& targets);

  // The stages of forward_backward, for pipeline executors: embed (first stage), blocks,
  // head (last stage: loss and its input gradient), then backward in reverse.
  Tensor embed(const Tensor& tokens, Saved& saved);                 // -> (B, T, C)
  Tensor blocks_forward(Tensor x, Saved& saved);                    // (B, T, C)
  LossSum head_loss(const Tensor& x, const Tensor& targets, float grad_scale, Saved& saved,
                    Tensor* dx);                                     // dx: (B, T, C) or null
  Tensor blocks_backward(Tensor dx, Saved& saved);
  void embed_backward(const Tensor& dx, Saved& saved);

  // Incremental decoding of one sequence: feeds tokens (1, Tn) at positions
  // [cache.len, cache.len + Tn), advances cache.len, returns the last position's logits (V).
  Tensor decode(const Tensor& tokens, KVCache& cache);
  KVCache make_cache(int64_t max_len) const;

 private:
  const Parameter& head_weight() const;
  Parameter& head_weight();

  ModelConfig cfg_;
  int first_, last_;
  std::unique_ptr<Embedding> embedding_;  // first stage only
  std::vector<std::unique_ptr<Block>> blocks_;
  std::unique_ptr<Norm> final_norm_;      // last stage only
  std::unique_ptr<Parameter> lm_head_;    // untied head, last stage only
  std::vector<Parameter*> params_;
};

}  // namespace braid
