// Causal self-attention for both families: GPT-2 (fused c_attn, biases) and Llama (separate
// q/k/v/o projections, RoPE, grouped-query heads). The projections are child slots.
#pragma once

#include <memory>

#include "core/model_config.h"
#include "core/models/kv_cache.h"
#include "core/models/layers.h"

namespace braid {

class SelfAttention : public Module {
 public:
  // path: "transformer.h.3.attn" (gpt2) or "model.layers.3.self_attn" (llama)
  SelfAttention(ExecContext& ctx, const ModelConfig& cfg, const std::string& path, int layer);

  Tensor forward(const Tensor& x, MicroBatch& mb) override;  // x: (B, T, C) -> (B, T, C)
  Tensor backward(const Tensor& dy, MicroBatch& mb) override;
  // Decoding: x (1, Tn, C) at absolute positions [st.pos, st.pos + Tn); appends k, v to
  // st.cache's layer.
  Tensor infer(const Tensor& x, InferState& st) override;

 private:
  // q (B,T,Hq,D), k, v (B,T,Hkv,D) from x: (B, T, C); RoPE applied at pos_offset (llama).
  // mb null: nothing is kept (decoding).
  void project(ExecContext& ctx, const Tensor& x, MicroBatch* mb, InferState* st, Tensor& q,
               Tensor& k, Tensor& v);
  Module& out_proj() const { return child(llama_ ? 3 : 1); }
  bool llama_;
  int layer_;
  int64_t n_head_, n_kv_head_, head_dim_;
  float rope_theta_;
};

}  // namespace braid
