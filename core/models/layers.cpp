// Linear, LayerNorm, RMSNorm and Embedding: thin owners of parameters around the kernels.
#include "core/models/layers.h"

#include "core/kernels/embedding.h"
#include "core/kernels/layernorm.h"
#include "core/kernels/linear.h"
#include "core/kernels/rmsnorm.h"

namespace braid {

Tensor as_rows(const Tensor& x) { return x.view({-1, x.dim(-1)}); }

namespace {
Shape with_last(const Shape& s, int64_t last) {
  Shape r = s;
  r.back() = last;
  return r;
}
}  // namespace

// ---- Linear ----

Linear::Linear(const std::string& prefix, int64_t in, int64_t out, bool has_bias)
    : weight(prefix + ".weight", {out, in}), in_features(in), out_features(out) {
  if (has_bias) bias = std::make_unique<Parameter>(prefix + ".bias", Shape{out});
}

Tensor Linear::infer(const Tensor& x) const {
  Tensor y = Tensor::empty(with_last(x.shape(), out_features));
  Tensor y2 = as_rows(y);
  linear_forward(y2, as_rows(x), weight.value, bias ? bias->value : Tensor());
  return y;
}

Tensor Linear::forward(const Tensor& x, Saved& saved) {
  saved.push(x);
  return infer(x);
}

Tensor Linear::backward(const Tensor& dy, Saved& saved) {
  Tensor x = saved.pop();
  Tensor dx = Tensor::empty(x.shape());
  Tensor dx2 = as_rows(dx);
  const Tensor dy2 = as_rows(dy);
  linear_backward_input(dx2, dy2, weight.value);
  if (weight.trainable) {
    Tensor db = bias && bias->trainable ? bias->grad : Tensor();
    linear_backward_weight(weight.grad, db, dy2, as_rows(x));
  }
  return dx;
}

void Linear::collect_parameters(std::vector<Parameter*>& out) {
  out.push_back(&weight);
  if (bias) out.push_back(bias.get());
}

// ---- LayerNorm ----

LayerNorm::LayerNorm(const std::string& prefix, int64_t dim, float eps_)
    : weight(prefix + ".weight", {dim}), bias(prefix + ".bias", {dim}), eps(eps_) {
  weight.value.fill_(1.0f);
}

Tensor LayerNorm::run(const Tensor& x, Tensor& mean, Tensor& rstd) const {
  const Tensor x2 = as_rows(x);
  Tensor y = Tensor::empty(x.shape());
  mean = Tensor::empty({x2.dim(0)});
  rstd = Tensor::empty({x2.dim(0)});
  Tensor y2 = as_rows(y);
  layernorm_forward(y2, mean, rstd, x2, weight.value, bias.value, eps);
  return y;
}

Tensor LayerNorm::infer(const Tensor& x) const {
  Tensor mean, rstd;
  return run(x, mean, rstd);
}

Tensor LayerNorm::forward(const Tensor& x, Saved& saved) {
  Tensor mean, rstd;
  Tensor y = run(x, mean, rstd);
  saved.push(x);
  saved.push(mean);
  saved.push(rstd);
  return y;
}

Tensor LayerNorm::backward(const Tensor& dy, Saved& saved) {
  Tensor rstd = saved.pop(), mean = saved.pop(), x = saved.pop();
  Tensor dx = Tensor::empty(x.shape());
  Tensor dx2 = as_rows(dx);
  Tensor dw = weight.trainable ? weight.grad : Tensor::zeros(weight.value.shape());
  Tensor db = bias.trainable ? bias.grad : Tensor::zeros(bias.value.shape());
  layernorm_backward(dx2, dw, db, as_rows(dy), as_rows(x), weight.value, mean, rstd);
  return dx;
}

void LayerNorm::collect_parameters(std::vector<Parameter*>& out) {
  out.push_back(&weight);
  out.push_back(&bias);
}

// ---- RMSNorm ----

RMSNorm::RMSNorm(const std::string& prefix, int64_t dim, float eps_)
    : weight(prefix + ".weight", {dim}), eps(eps_) {
  weight.value.fill_(1.0f);
}

Tensor RMSNorm::run(const Tensor& x, Tensor& rstd) const {
  const Tensor x2 = as_rows(x);
  Tensor y = Tensor::empty(x.shape());
  rstd = Tensor::empty({x2.dim(0)});
  Tensor y2 = as_rows(y);
  rmsnorm_forward(y2, rstd, x2, weight.value, eps);
  return y;
}

Tensor RMSNorm::infer(const Tensor& x) const {
  Tensor rstd;
  return run(x, rstd);
}

Tensor RMSNorm::forward(const Tensor& x, Saved& saved) {
  Tensor rstd;
  Tensor y = run(x, rstd);
  saved.push(x);
  saved.push(rstd);
  return y;
}

Tensor RMSNorm::backward(const Tensor& dy, Saved& saved) {
  Tensor rstd = saved.pop(), x = saved.pop();
  Tensor dx = Tensor::empty(x.shape());
  Tensor dx2 = as_rows(dx);
  Tensor dw = weight.trainable ? weight.grad : Tensor::zeros(weight.value.shape());
  rmsnorm_backward(dx2, dw, as_rows(dy), as_rows(x), weight.value, rstd);
  return dx;
}

void RMSNorm::collect_parameters(std::vector<Parameter*>& out) { out.push_back(&weight); }

// ---- Embedding ----

Embedding::Embedding(const std::string& token_name, int64_t vocab, int64_t dim,
                     const std::string& position_name, int64_t positions)
    : wte(token_name, {vocab, dim}) {
  if (positions > 0) wpe = std::make_unique<Parameter>(position_name, Shape{positions, dim});
}

Tensor Embedding::infer(const Tensor& tokens, int64_t pos_offset) const {
  Tensor out = Tensor::empty({tokens.dim(0), tokens.dim(1), wte.value.dim(1)});
  embedding_forward(out, tokens, wte.value, wpe ? wpe->value : Tensor(), pos_offset);
  return out;
}

Tensor Embedding::forward(const Tensor& tokens, Saved& saved, int64_t pos_offset) {
  BRAID_CHECK(pos_offset == 0, "training forward starts at position 0");
  saved.push(tokens);
  return infer(tokens, pos_offset);
}

void Embedding::backward(const Tensor& dx, Saved& saved) {
  Tensor tokens = saved.pop();
  Tensor dwte = wte.trainable ? wte.grad : Tensor::zeros(wte.value.shape());
  Tensor dwpe;
  if (wpe) dwpe = wpe->trainable ? wpe->grad : Tensor::zeros(wpe->value.shape());
  embedding_backward(dwte, dwpe, dx, tokens, 0);
}

void Embedding::collect_parameters(std::vector<Parameter*>& out) {
  out.push_back(&wte);
  if (wpe) out.push_back(wpe.get());
}

}  // namespace braid
