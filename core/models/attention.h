// Causal self-attention for both families: GPT-2 (fused c_attn, biases) and Llama (separate
// q/k/v/o projections, RoPE of any rope type, grouped-query heads, optional q/k/v biases and
// sliding window). The projections are child slots. The head
// counts are the projections' (their weights' rows over the head size), so a placement that
// keeps some heads' rows (tensor parallelism) runs the same code on them; such a placement
// also gives the module an input region (set_input_region), the module that hands the
// projections their input and takes back its gradient (a collective).
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

  // Runs `region` on the input before the projections (forward, infer) and on the input
  // gradient after them (backward), in the slot `input_region`. Once per module.
  void set_input_region(std::unique_ptr<Module> region);

 private:
  // q (B,T,Hq,D), k, v (B,T,Hkv,D) from x: (B, T, C); RoPE applied at pos_offset (llama).
  // mb null: nothing is kept (decoding).
  void project(ExecContext& ctx, const Tensor& x, MicroBatch* mb, InferState* st, Tensor& q,
               Tensor& k, Tensor& v);
  Module& out_proj() const { return child(llama_ ? 3 : 1); }
  bool llama_;
  int layer_;
  int64_t head_dim_;
  Module* region_ = nullptr;
  RopeScaling rope_;
  int64_t window_;  // sliding window, 0: none
};

}  // namespace braid
