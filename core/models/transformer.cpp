// Transformer assembly, init, stage forward/backward/loss and decoding.
#include "core/models/transformer.h"

#include <cmath>

#include "core/kernels/elementwise.h"
#include "core/kernels/linear.h"
#include "core/profile.h"
#include "core/random.h"

namespace braid {

namespace {
std::string embedding_name(const ModelConfig& cfg) {
  return cfg.is_llama() ? "model.embed_tokens.weight" : "transformer.wte.weight";
}
}  // namespace

Transformer::Transformer(ExecContext& ctx, const ModelConfig& cfg, BlockRange range)
    : Module(""), cfg_(cfg) {
  cfg_.validate();
  first_ = range.first;
  last_ = range.last < 0 ? cfg.n_layer : range.last;
  BRAID_CHECK(0 <= first_ && first_ < last_ && last_ <= cfg.n_layer, "block range [{}, {}) of {}",
              first_, last_, cfg.n_layer);
  const bool llama = cfg.is_llama();
  if (first_ == 0) {
    auto e = llama ? std::make_unique<Embedding>(ctx, "model.embed_tokens", embedding_name(cfg),
                                                 cfg.vocab_size, cfg.n_embd, "", 0)
                   : std::make_unique<Embedding>(ctx, "transformer.wte", embedding_name(cfg),
                                                 cfg.vocab_size, cfg.n_embd,
                                                 "transformer.wpe.weight", cfg.context_length);
    has_embedding_ = true;
    add_slot(llama ? "embed_tokens" : "wte", std::move(e));
  }
  block_slot0_ = num_slots();
  for (int l = first_; l < last_; ++l)
    add_slot(std::to_string(l), std::make_unique<Block>(ctx, cfg, l));
  if (last_ == cfg.n_layer) {
    std::unique_ptr<Module> n;
    if (llama)
      n = std::make_unique<RMSNorm>(ctx, "model.norm", cfg.n_embd, cfg.norm_eps);
    else
      n = std::make_unique<LayerNorm>(ctx, "transformer.ln_f", cfg.n_embd, cfg.norm_eps);
    has_head_ = true;
    add_slot(llama ? "norm" : "ln_f", std::move(n));
    if (!cfg.tied()) {
      lm_head_ = std::make_unique<Parameter>("lm_head.weight",
                                             weight_tensor(ctx, {cfg.vocab_size, cfg.n_embd}));
    } else if (!has_embedding_) {
      // The head's replica of the token table (same name, so init gives it the same values).
      lm_head_ = std::make_unique<Parameter>(embedding_name(cfg),
                                             weight_tensor(ctx, {cfg.vocab_size, cfg.n_embd}));
      lm_head_->replica = true;
    }
  }
  refresh_parameters();
}

void Transformer::refresh_parameters() {
  params_.clear();
  collect_parameters(params_);
  if (lm_head_) params_.push_back(lm_head_.get());
}

Parameter* Transformer::find_parameter(const std::string& name) const {
  for (Parameter* p : params_)
    if (p->name == name) return p;
  return nullptr;
}

Parameter* Transformer::tied_embedding() {
  if (!cfg_.tied()) return nullptr;
  if (has_embedding_) return find_parameter(embedding_name(cfg_));
  return lm_head_.get();  // null on a middle stage
}

Parameter& Transformer::head_weight() {
  BRAID_CHECK(has_head(), "the LM head is on the last stage");
  if (lm_head_) return *lm_head_;
  Parameter* wte = find_parameter(embedding_name(cfg_));
  BRAID_CHECK(wte, "the tied head has no {}", embedding_name(cfg_));
  return *wte;
}

void Transformer::run_head_loss(ExecContext& ctx, Tensor& losses, Tensor& dx, Tensor& dw,
                                const Tensor& x, const Tensor& w, const Tensor& targets,
                                float grad_scale) {
  if (head_loss_)
    head_loss_(ctx, losses, dx, dw, x, w, targets, grad_scale);
  else
    lm_head_cross_entropy(ctx, losses, dx, dw, x, w, targets.view({targets.numel()}), grad_scale);
}

void Transformer::init_weights() {
  for (Parameter* p : params_) init_parameter(p->name, p->value);
}

void Transformer::init_parameter(const std::string& n, Tensor& value) const {
  const float resid_std = cfg_.init_std / std::sqrt(2.0f * static_cast<float>(cfg_.n_layer));
  auto ends_with = [](const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() &&
           s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (value.ndim() == 1) {
    // Norm weights start at 1, biases at 0.
    const bool norm_weight = ends_with(n, ".weight");
    value.fill_(norm_weight ? 1.0f : 0.0f);
    return;
  }
  const bool residual_out = ends_with(n, "attn.c_proj.weight") ||
                            ends_with(n, "mlp.c_proj.weight") || ends_with(n, "o_proj.weight") ||
                            ends_with(n, "down_proj.weight");
  fill_normal(value, residual_out ? resid_std : cfg_.init_std, cfg_.seed, hash_string(n));
}

void Transformer::zero_grad(ExecContext& ctx) {
  // Deferred: a gradient is zeroed when first handed out, or not at all where its first
  // contribution overwrites it (the linear layers' weight-gradient GEMMs).
  for (Parameter* p : params_) p->defer_zero_grad(ctx);
}

Tensor Transformer::forward(const Tensor& input, MicroBatch& mb) {
  Tensor x = input;
  if (has_embedding_) {
    BRAID_CHECK(input.ndim() == 2 && input.dim(1) <= cfg_.context_length,
                "tokens {} exceed context_length {}", input.str(), cfg_.context_length);
    x = embedding().forward(input, mb);
  }
  for (int i = 0; i < last_ - first_; ++i) x = block(i).forward(x, mb);
  return x;
}

LossSum Transformer::loss(const Tensor& x, const Tensor& targets, float grad_scale,
                          MicroBatch& mb) {
  BRAID_CHECK(has_head(), "loss() on a stage without the LM head (blocks [{}, {}) of {})", first_,
              last_, cfg_.n_layer);
  ExecContext& ctx = mb.ctx();
  // x may be this rank's slice of the sequences (sequence parallelism): its rows, not the
  // targets', size the input gradient; the head loss gives every target's loss.
  const int64_t B = x.dim(0), T = x.dim(1), C = x.dim(2), N = targets.numel();
  Tensor h = final_norm().forward(x, mb);
  Tensor losses = x.new_empty({N}, DType::F32);
  Tensor dh = x.new_empty({B * T, C}, x.dtype());
  Parameter& head = head_weight();
  Tensor dw = head.trainable ? head.grad() : Tensor();
  run_head_loss(ctx, losses, dh, dw, h.view({B * T, C}), head.value, targets, grad_scale);
  // The tied token table on this stage gets its last contribution in the embedding's backward.
  if (head.trainable && !(cfg_.tied() && has_embedding_)) mb.grad_ready(head);
  mb.push(final_norm().backward(dh.view({B, T, C}), mb));
  return loss_sum(ctx, losses, targets.view({N}));
}

Tensor Transformer::backward(const Tensor& dy, MicroBatch& mb) {
  Tensor dx = dy;
  if (!dx.defined()) {
    BRAID_CHECK(has_head(), "backward() without an output gradient on a stage without the loss");
    dx = mb.pop();  // kept by loss()
  }
  for (int i = last_ - first_ - 1; i >= 0; --i) dx = block(i).backward(dx, mb);
  if (has_embedding_) return embedding().backward(dx, mb);
  return dx;
}

Tensor Transformer::forward_eval(ExecContext& ctx, const Tensor& input,
                                 const Tensor& sample_starts) {
  Tensor x = input;
  if (has_embedding_) {
    InferState st{ctx};
    st.sample_starts = sample_starts;
    x = embedding().infer(input, st);
  }
  MicroBatch scratch(ctx);  // thrown away: nothing is kept
  scratch.sample_starts = sample_starts;
  for (int i = 0; i < last_ - first_; ++i) {
    x = block(i).forward(x, scratch);
    scratch.clear_stash();
  }
  return x;
}

LossSum Transformer::loss_eval(ExecContext& ctx, const Tensor& x, const Tensor& targets) {
  BRAID_CHECK(has_head(), "loss_eval() on a stage without the LM head");
  const int64_t B = x.dim(0), T = x.dim(1), C = x.dim(2), N = targets.numel();
  InferState st{ctx};
  Tensor h = final_norm().infer(x, st);
  Tensor losses = x.new_empty({N}, DType::F32);
  Tensor none, none_w;
  Parameter& head = head_weight();
  run_head_loss(ctx, losses, none, none_w, h.view({B * T, C}), head.value, targets, 0.0f);
  return loss_sum(ctx, losses, targets.view({N}));
}

LossSum Transformer::forward_backward(MicroBatch& mb, const Tensor& tokens, const Tensor& targets,
                                      float grad_scale) {
  BRAID_CHECK(has_embedding_ && has_head(), "forward_backward() needs the whole model");
  LossSum r = loss(forward(tokens, mb), targets, grad_scale, mb);
  backward(Tensor(), mb);
  BRAID_CHECK(mb.stash_size() == 0, "{} saved tensors left after backward", mb.stash_size());
  return r;
}

LossSum Transformer::forward_loss(ExecContext& ctx, const Tensor& tokens, const Tensor& targets,
                                  const Tensor& sample_starts) {
  BRAID_CHECK(has_embedding_ && has_head(), "forward_loss() needs the whole model");
  return loss_eval(ctx, forward_eval(ctx, tokens, sample_starts), targets);
}

Tensor Transformer::infer(const Tensor& input, InferState& st) {
  Tensor x = input;
  if (has_embedding_) x = embedding().infer(input, st);
  for (int i = 0; i < last_ - first_; ++i) x = block(i).infer(x, st);
  return x;
}

KVCache Transformer::make_cache(ExecContext& ctx, int64_t max_len) const {
  BRAID_CHECK(max_len <= cfg_.context_length, "cache of {} exceeds context_length {}", max_len,
              cfg_.context_length);
  // Activations take the dtype of the weights (embedding output); so does the cache.
  const DType dt = params_.empty() ? DType::F32 : params_.front()->value.dtype();
  return KVCache(ctx, cfg_.n_layer, first_, last_, max_len, cfg_.kv_heads(), cfg_.head_dim(), dt);
}

Tensor Transformer::decode(ExecContext& ctx, const Tensor& tokens, KVCache& cache) {
  BRAID_CHECK(has_embedding_ && has_head(), "decode() needs the whole model");
  BRAID_CHECK(!head_loss_, "decode() needs the single-rank LM head (no tensor parallelism)");
  const int64_t Tn = tokens.dim(1), C = cfg_.n_embd;
  InferState st{ctx, &cache, cache.len};
  Tensor x = infer(tokens, st);
  cache.len += Tn;
  Tensor last = final_norm().infer(x.view({Tn, C}).slice0(Tn - 1, Tn), st);  // (1, C)
  Tensor logits = x.new_empty({1, cfg_.vocab_size}, DType::F32);
  linear_forward(ctx, logits, last, head_weight().value, Tensor());
  return logits.view({cfg_.vocab_size});
}

}  // namespace braid
