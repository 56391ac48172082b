// Causal self-attention for both families: GPT-2 (fused c_attn, biases) and Llama (separate
// q/k/v/o projections, RoPE, grouped-query heads).
#pragma once

#include <memory>

#include "core/model_config.h"
#include "core/models/kv_cache.h"
#include "core/models/layers.h"

namespace braid {

class SelfAttention : public Module {
 public:
  // prefix: "transformer.h.3.attn" (gpt2) or "model.layers.3.self_attn" (llama)
  SelfAttention(const ModelConfig& cfg, const std::string& prefix);

  Tensor forward(const Tensor& x, Saved& saved) override;  // x: (B, T, C) -> (B, T, C)
  Tensor backward(const Tensor& dy, Saved& saved) override;
  void collect_parameters(std::vector<Parameter*>& out) override;
  // Decoding: x (1, Tn, C) at absolute positions [cache.len, cache.len + Tn); appends k, v.
  Tensor infer(const Tensor& x, KVCache::Layer& cache, int64_t pos);

  // gpt2
  std::unique_ptr<Linear> c_attn, c_proj;
  // llama
  std::unique_ptr<Linear> q_proj, k_proj, v_proj, o_proj;

 private:
  // q (B,T,Hq,D), k, v (B,T,Hkv,D) from x: (B, T, C); RoPE applied at pos_offset (llama).
  void project(const Tensor& x, Saved* saved, int64_t pos_offset, Tensor& q, Tensor& k,
               Tensor& v);
  bool llama_;
  int64_t n_head_, n_kv_head_, head_dim_;
  float rope_theta_;
};

}  // namespace braid
