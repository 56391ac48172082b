// Transformer block wiring (names follow HF GPT-2 / Llama).
#include "core/models/block.h"

#include "core/kernels/elementwise.h"

namespace braid {

std::string block_path(const ModelConfig& cfg, int layer) {
  return (cfg.is_llama() ? "model.layers." : "transformer.h.") + std::to_string(layer);
}

Block::Block(ExecContext& ctx, const ModelConfig& cfg, int layer) : Module(block_path(cfg, layer)) {
  const std::string& p = path();
  if (cfg.is_llama()) {
    add_slot("input_layernorm",
             std::make_unique<RMSNorm>(ctx, p + ".input_layernorm", cfg.n_embd, cfg.norm_eps));
    add_slot("self_attn", std::make_unique<SelfAttention>(ctx, cfg, p + ".self_attn", layer));
    add_slot(
        "post_attention_layernorm",
        std::make_unique<RMSNorm>(ctx, p + ".post_attention_layernorm", cfg.n_embd, cfg.norm_eps));
  } else {
    add_slot("ln_1", std::make_unique<LayerNorm>(ctx, p + ".ln_1", cfg.n_embd, cfg.norm_eps));
    add_slot("attn", std::make_unique<SelfAttention>(ctx, cfg, p + ".attn", layer));
    add_slot("ln_2", std::make_unique<LayerNorm>(ctx, p + ".ln_2", cfg.n_embd, cfg.norm_eps));
  }
  add_slot("mlp", std::make_unique<MLP>(ctx, cfg, p + ".mlp"));
}

Tensor Block::forward(const Tensor& x, MicroBatch& mb) {
  ExecContext& ctx = mb.ctx();
  Tensor a = attn().forward(norm1().forward(x, mb), mb);
  Tensor h = empty_like(x);
  add(ctx, h, x, a);
  Tensor m = mlp().forward(norm2().forward(h, mb), mb);
  add(ctx, m, h, m);  // y = h + mlp(...), in place
  return m;
}

Tensor Block::backward(const Tensor& dy, MicroBatch& mb) {
  ExecContext& ctx = mb.ctx();
  Tensor dh = norm2().backward(mlp().backward(dy, mb), mb);
  add_inplace(ctx, dh, dy);  // the residual branch
  Tensor dx = norm1().backward(attn().backward(dh, mb), mb);
  add_inplace(ctx, dx, dh);
  return dx;
}

Tensor Block::infer(const Tensor& x, InferState& st) {
  ExecContext& ctx = st.ctx;
  Tensor a = attn().infer(norm1().infer(x, st), st);
  Tensor h = empty_like(x);
  add(ctx, h, x, a);
  Tensor m = mlp().infer(norm2().infer(h, st), st);
  add(ctx, m, h, m);
  return m;
}

}  // namespace braid
