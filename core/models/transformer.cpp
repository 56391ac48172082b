// Transformer assembly, init, training and decoding paths.
#include "core/models/transformer.h"

#include <cmath>

#include "core/kernels/cross_entropy.h"
#include "core/kernels/linear.h"
#include "core/random.h"

namespace braid {

Transformer::Transformer(const ModelConfig& cfg, BlockRange range) : cfg_(cfg) {
  cfg_.validate();
  first_ = range.first;
  last_ = range.last < 0 ? cfg.n_layer : range.last;
  BRAID_CHECK(0 <= first_ && first_ < last_ && last_ <= cfg.n_layer, "block range [{}, {}) of {}",
              first_, last_, cfg.n_layer);
  const bool llama = cfg.is_llama();
  if (first_ == 0) {
    embedding_ = llama ? std::make_unique<Embedding>("model.embed_tokens.weight", cfg.vocab_size,
                                                     cfg.n_embd, "", 0)
                       : std::make_unique<Embedding>("transformer.wte.weight", cfg.vocab_size,
                                                     cfg.n_embd, "transformer.wpe.weight",
                                                     cfg.context_length);
    embedding_->collect_parameters(params_);
  }
  for (int l = first_; l < last_; ++l) {
    blocks_.push_back(std::make_unique<Block>(cfg, l));
    blocks_.back()->collect_parameters(params_);
  }
  if (last_ == cfg.n_layer) {
    if (llama) {
      final_norm_ = std::make_unique<RMSNorm>("model.norm", cfg.n_embd, cfg.norm_eps);
    } else {
      final_norm_ = std::make_unique<LayerNorm>("transformer.ln_f", cfg.n_embd, cfg.norm_eps);
    }
    final_norm_->collect_parameters(params_);
    BRAID_CHECK(!cfg.tied() || embedding_, "a tied LM head needs the embedding on the same stage");
    if (!cfg.tied()) {
      lm_head_ = std::make_unique<Parameter>("lm_head.weight", Shape{cfg.vocab_size, cfg.n_embd});
      params_.push_back(lm_head_.get());
    }
  }
}

Parameter* Transformer::find(const std::string& name) const {
  for (Parameter* p : params_)
    if (p->name == name) return p;
  return nullptr;
}

const Parameter& Transformer::head_weight() const {
  return lm_head_ ? *lm_head_ : embedding_->wte;
}
Parameter& Transformer::head_weight() { return lm_head_ ? *lm_head_ : embedding_->wte; }

void Transformer::init_weights() {
  const float resid_std = cfg_.init_std / std::sqrt(2.0f * static_cast<float>(cfg_.n_layer));
  auto ends_with = [](const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  for (Parameter* p : params_) {
    const std::string& n = p->name;
    if (p->value.ndim() == 1) {
      // Norm weights start at 1, biases at 0.
      const bool norm_weight = ends_with(n, ".weight");
      p->value.fill_(norm_weight ? 1.0f : 0.0f);
      continue;
    }
    const bool residual_out = ends_with(n, "attn.c_proj.weight") ||
                              ends_with(n, "mlp.c_proj.weight") ||
                              ends_with(n, "o_proj.weight") || ends_with(n, "down_proj.weight");
    fill_normal(p->value, residual_out ? resid_std : cfg_.init_std, cfg_.seed, hash_string(n));
  }
}

void Transformer::zero_grad() {
  for (Parameter* p : params_) p->zero_grad();
}

Tensor Transformer::embed(const Tensor& tokens, Saved& saved) {
  BRAID_CHECK(embedding_, "embed() on a stage without the embedding");
  BRAID_CHECK(tokens.ndim() == 2 && tokens.dim(1) <= cfg_.context_length,
              "tokens {} exceed context_length {}", tokens.str(), cfg_.context_length);
  return embedding_->forward(tokens, saved);
}

Tensor Transformer::blocks_forward(Tensor x, Saved& saved) {
  for (auto& b : blocks_) x = b->forward(x, saved);
  return x;
}

LossSum Transformer::head_loss(const Tensor& x, const Tensor& targets, float grad_scale,
                               Saved& saved, Tensor* dx) {
  BRAID_CHECK(final_norm_, "head_loss() on a stage without the LM head");
  const int64_t B = x.dim(0), T = x.dim(1), C = x.dim(2);
  // Evaluation (dx == null) keeps nothing for a backward that will not come.
  Tensor h = dx ? final_norm_->forward(x, saved) : final_norm_->infer(x);
  Tensor losses = Tensor::empty({B * T});
  Tensor dh, dw;
  Parameter& head = head_weight();
  if (dx) {
    dh = Tensor::empty({B * T, C});
    dw = head.trainable ? head.grad : Tensor::zeros(head.value.shape());
  }
  lm_head_cross_entropy(losses, dh, dw, h.view({B * T, C}), head.value, targets.view({B * T}),
                        grad_scale);
  LossSum r;
  const float* l = losses.f32();
  const int32_t* t = targets.i32();
  for (int64_t i = 0; i < B * T; ++i) {
    if (t[i] < 0) continue;
    r.sum += l[i];
    ++r.count;
  }
  if (dx) *dx = final_norm_->backward(dh.view({B, T, C}), saved);
  return r;
}

Tensor Transformer::blocks_backward(Tensor dx, Saved& saved) {
  for (auto it = blocks_.rbegin(); it != blocks_.rend(); ++it) dx = (*it)->backward(dx, saved);
  return dx;
}

void Transformer::embed_backward(const Tensor& dx, Saved& saved) {
  embedding_->backward(dx, saved);
}

LossSum Transformer::forward_backward(const Tensor& tokens, const Tensor& targets,
                                      float grad_scale) {
  Saved saved;
  Tensor x = blocks_forward(embed(tokens, saved), saved);
  Tensor dx;
  LossSum r = head_loss(x, targets, grad_scale, saved, &dx);
  embed_backward(blocks_backward(dx, saved), saved);
  BRAID_CHECK(saved.empty(), "{} saved tensors left after backward", saved.size());
  return r;
}

LossSum Transformer::forward_loss(const Tensor& tokens, const Tensor& targets) {
  const Tensor x = embedding_->infer(tokens, 0);
  // Evaluation runs the training forward with a throwaway stash: the same kernels, so eval
  // and training losses agree bit for bit on the same batch.
  Saved saved;
  Tensor h = blocks_forward(x, saved);
  saved.clear();
  return head_loss(h, targets, 0.0f, saved, nullptr);
}

KVCache Transformer::make_cache(int64_t max_len) const {
  BRAID_CHECK(max_len <= cfg_.context_length, "cache of {} exceeds context_length {}", max_len,
              cfg_.context_length);
  return KVCache(cfg_.n_layer, max_len, cfg_.kv_heads(), cfg_.head_dim());
}

Tensor Transformer::decode(const Tensor& tokens, KVCache& cache) {
  BRAID_CHECK(embedding_ && final_norm_, "decode() needs the whole model");
  const int64_t Tn = tokens.dim(1), C = cfg_.n_embd;
  Tensor x = embedding_->infer(tokens, cache.len);
  for (size_t l = 0; l < blocks_.size(); ++l) x = blocks_[l]->infer(x, cache.layers[l], cache.len);
  cache.len += Tn;
  Tensor last = final_norm_->infer(x.view({Tn, C}).slice0(Tn - 1, Tn));  // (1, C)
  Tensor logits = Tensor::empty({1, cfg_.vocab_size});
  linear_forward(logits, last, head_weight().value, Tensor());
  return logits.view({cfg_.vocab_size});
}

}  // namespace braid
