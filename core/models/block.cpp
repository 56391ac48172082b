// Transformer block wiring (names follow HF GPT-2 / Llama).
#include "core/models/block.h"

#include "core/kernels/elementwise.h"

namespace braid {

Block::Block(const ModelConfig& cfg, int layer) {
  if (cfg.is_llama()) {
    const std::string p = "model.layers." + std::to_string(layer);
    norm1 = std::make_unique<RMSNorm>(p + ".input_layernorm", cfg.n_embd, cfg.norm_eps);
    attn = std::make_unique<SelfAttention>(cfg, p + ".self_attn");
    norm2 = std::make_unique<RMSNorm>(p + ".post_attention_layernorm", cfg.n_embd, cfg.norm_eps);
    mlp = std::make_unique<MLP>(cfg, p + ".mlp");
  } else {
    const std::string p = "transformer.h." + std::to_string(layer);
    norm1 = std::make_unique<LayerNorm>(p + ".ln_1", cfg.n_embd, cfg.norm_eps);
    attn = std::make_unique<SelfAttention>(cfg, p + ".attn");
    norm2 = std::make_unique<LayerNorm>(p + ".ln_2", cfg.n_embd, cfg.norm_eps);
    mlp = std::make_unique<MLP>(cfg, p + ".mlp");
  }
}

Tensor Block::forward(const Tensor& x, Saved& saved) {
  Tensor a = attn->forward(norm1->forward(x, saved), saved);
  Tensor h = Tensor::empty(x.shape());
  add(h, x, a);
  Tensor m = mlp->forward(norm2->forward(h, saved), saved);
  add(m, h, m);  // y = h + mlp(...), in place
  return m;
}

Tensor Block::backward(const Tensor& dy, Saved& saved) {
  Tensor dh = norm2->backward(mlp->backward(dy, saved), saved);
  add_inplace(dh, dy);  // the residual branch
  Tensor dx = norm1->backward(attn->backward(dh, saved), saved);
  add_inplace(dx, dh);
  return dx;
}

Tensor Block::infer(const Tensor& x, KVCache::Layer& cache, int64_t pos) {
  Tensor a = attn->infer(norm1->infer(x), cache, pos);
  Tensor h = Tensor::empty(x.shape());
  add(h, x, a);
  Tensor m = mlp->infer(norm2->infer(h));
  add(m, h, m);
  return m;
}

void Block::collect_parameters(std::vector<Parameter*>& out) {
  norm1->collect_parameters(out);
  attn->collect_parameters(out);
  norm2->collect_parameters(out);
  mlp->collect_parameters(out);
}

}  // namespace braid
