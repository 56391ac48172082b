// Linear, LayerNorm, RMSNorm and Embedding: thin owners of parameters around the kernels.
#include "core/models/layers.h"

#include "core/kernels/embedding.h"
#include "core/kernels/layernorm.h"
#include "core/kernels/linear.h"
#include "core/kernels/rmsnorm.h"

namespace braid {

Tensor as_rows(const Tensor& x) { return x.view({-1, x.dim(-1)}); }

Tensor weight_tensor(ExecContext& ctx, const Shape& shape) {
  return ctx.zeros(shape, DType::F32, MemCategory::Weights);
}

namespace {
Shape with_last(const Shape& s, int64_t last) {
  Shape r = s;
  r.back() = last;
  return r;
}

// Reports params (already in reverse order of use) ready on mb.
void report_ready(MicroBatch& mb, std::initializer_list<Parameter*> params) {
  for (Parameter* p : params)
    if (p && p->trainable) mb.grad_ready(*p);
}
}  // namespace

// ---- Linear ----

Linear::Linear(ExecContext& ctx, const std::string& path, int64_t in, int64_t out, bool has_bias)
    : Module(path),
      weight(path + ".weight", weight_tensor(ctx, {out, in})),
      in_features(in),
      out_features(out) {
  if (has_bias) bias = std::make_unique<Parameter>(path + ".bias", weight_tensor(ctx, {out}));
}

Tensor Linear::run(ExecContext& ctx, const Tensor& x) const {
  Tensor y = x.new_empty(with_last(x.shape(), out_features), x.dtype());
  Tensor y2 = as_rows(y);
  linear_forward(ctx, y2, as_rows(x), weight.value, bias ? bias->value : Tensor());
  return y;
}

Tensor Linear::infer(const Tensor& x, InferState& st) { return run(st.ctx, x); }

Tensor Linear::forward(const Tensor& x, MicroBatch& mb) {
  mb.push(x);
  return run(mb.ctx(), x);
}

Tensor linear_layer_backward(MicroBatch& mb, const Tensor& x, const Tensor& dy, Parameter& weight,
                             Parameter* bias) {
  ExecContext& ctx = mb.ctx();
  Tensor dx = empty_like(x);
  Tensor dx2 = as_rows(dx);
  const Tensor dy2 = as_rows(dy);
  linear_backward_input(ctx, dx2, dy2, weight.value);
  const bool train_w = weight.trainable, train_b = bias && bias->trainable;
  if (!train_w && !train_b) return dx;  // frozen: no weight-gradient GEMM at all
  // What the weight GEMM needs is captured by value (shared storage), so it can run later.
  auto work = [&ctx, &weight, bias, dy2, x2 = as_rows(x), train_w, train_b] {
    Tensor dw = train_w ? weight.grad() : Tensor();
    Tensor db = train_b ? bias->grad() : Tensor();
    linear_backward_weight(ctx, dw, db, dy2, x2);
  };
  std::vector<Parameter*> ready;  // reverse order of use: bias, then weight
  if (train_b) ready.push_back(bias);
  if (train_w) ready.push_back(&weight);
  if (mb.defer_weight_grads()) {
    mb.defer(std::move(work), std::move(ready));
  } else {
    work();
    for (Parameter* p : ready) mb.grad_ready(*p);
  }
  return dx;
}

Tensor Linear::backward(const Tensor& dy, MicroBatch& mb) {
  const Tensor x = mb.pop();
  return linear_layer_backward(mb, x, dy, weight, bias.get());
}

void Linear::own_parameters(std::vector<Parameter*>& out) {
  out.push_back(&weight);
  if (bias) out.push_back(bias.get());
}

bool is_linear(const Module& m) { return dynamic_cast<const Linear*>(&m) != nullptr; }
bool is_linear_like(const Module& m) { return dynamic_cast<const LinearLike*>(&m) != nullptr; }

// ---- LayerNorm ----

LayerNorm::LayerNorm(ExecContext& ctx, const std::string& path, int64_t dim, float eps_)
    : Module(path),
      weight(path + ".weight", weight_tensor(ctx, {dim})),
      bias(path + ".bias", weight_tensor(ctx, {dim})),
      eps(eps_) {
  weight.value.fill_(1.0f);
}

Tensor LayerNorm::run(ExecContext& ctx, const Tensor& x, Tensor& mean, Tensor& rstd) const {
  const Tensor x2 = as_rows(x);
  Tensor y = empty_like(x);
  mean = x.new_empty({x2.dim(0)}, DType::F32);
  rstd = x.new_empty({x2.dim(0)}, DType::F32);
  Tensor y2 = as_rows(y);
  layernorm_forward(ctx, y2, mean, rstd, x2, weight.value, bias.value, eps);
  return y;
}

Tensor LayerNorm::infer(const Tensor& x, InferState& st) {
  Tensor mean, rstd;
  return run(st.ctx, x, mean, rstd);
}

Tensor LayerNorm::forward(const Tensor& x, MicroBatch& mb) {
  Tensor mean, rstd;
  Tensor y = run(mb.ctx(), x, mean, rstd);
  mb.push(x);
  mb.push(mean);
  mb.push(rstd);
  return y;
}

Tensor LayerNorm::backward(const Tensor& dy, MicroBatch& mb) {
  Tensor rstd = mb.pop(), mean = mb.pop(), x = mb.pop();
  Tensor dx = empty_like(x);
  Tensor dx2 = as_rows(dx);
  Tensor dw = weight.trainable ? weight.grad() : Tensor();
  Tensor db = bias.trainable ? bias.grad() : Tensor();
  layernorm_backward(mb.ctx(), dx2, dw, db, as_rows(dy), as_rows(x), weight.value, mean, rstd);
  report_ready(mb, {&bias, &weight});
  return dx;
}

void LayerNorm::own_parameters(std::vector<Parameter*>& out) {
  out.push_back(&weight);
  out.push_back(&bias);
}

// ---- RMSNorm ----

RMSNorm::RMSNorm(ExecContext& ctx, const std::string& path, int64_t dim, float eps_)
    : Module(path), weight(path + ".weight", weight_tensor(ctx, {dim})), eps(eps_) {
  weight.value.fill_(1.0f);
}

Tensor RMSNorm::run(ExecContext& ctx, const Tensor& x, Tensor& rstd) const {
  const Tensor x2 = as_rows(x);
  Tensor y = empty_like(x);
  rstd = x.new_empty({x2.dim(0)}, DType::F32);
  Tensor y2 = as_rows(y);
  rmsnorm_forward(ctx, y2, rstd, x2, weight.value, eps);
  return y;
}

Tensor RMSNorm::infer(const Tensor& x, InferState& st) {
  Tensor rstd;
  return run(st.ctx, x, rstd);
}

Tensor RMSNorm::forward(const Tensor& x, MicroBatch& mb) {
  Tensor rstd;
  Tensor y = run(mb.ctx(), x, rstd);
  mb.push(x);
  mb.push(rstd);
  return y;
}

Tensor RMSNorm::backward(const Tensor& dy, MicroBatch& mb) {
  Tensor rstd = mb.pop(), x = mb.pop();
  Tensor dx = empty_like(x);
  Tensor dx2 = as_rows(dx);
  Tensor dw = weight.trainable ? weight.grad() : Tensor();
  rmsnorm_backward(mb.ctx(), dx2, dw, as_rows(dy), as_rows(x), weight.value, rstd);
  report_ready(mb, {&weight});
  return dx;
}

void RMSNorm::own_parameters(std::vector<Parameter*>& out) { out.push_back(&weight); }

// ---- Embedding ----

Embedding::Embedding(ExecContext& ctx, const std::string& path, const std::string& token_name,
                     int64_t vocab, int64_t dim, const std::string& position_name,
                     int64_t positions)
    : Module(path), wte(token_name, weight_tensor(ctx, {vocab, dim})) {
  if (positions > 0)
    wpe = std::make_unique<Parameter>(position_name, weight_tensor(ctx, {positions, dim}));
}

Tensor Embedding::infer(const Tensor& tokens, InferState& st) {
  // Activations are stored in the weights' dtype (bf16/f16 under mixed precision).
  Tensor out = st.ctx.empty({tokens.dim(0), tokens.dim(1), wte.value.dim(1)}, wte.value.dtype());
  embedding_forward(st.ctx, out, tokens, wte.value, wpe ? wpe->value : Tensor(), st.pos);
  return out;
}

Tensor Embedding::forward(const Tensor& tokens, MicroBatch& mb) {
  mb.push(tokens);
  InferState st{mb.ctx()};
  return infer(tokens, st);
}

Tensor Embedding::backward(const Tensor& dx, MicroBatch& mb) {
  Tensor tokens = mb.pop();
  Tensor dwte = wte.trainable ? wte.grad() : Tensor();
  Tensor dwpe = wpe && wpe->trainable ? wpe->grad() : Tensor();
  if (dwte.defined() || dwpe.defined())  // frozen tables: no scatter at all
    embedding_backward(mb.ctx(), dwte, dwpe, dx, tokens, 0);
  report_ready(mb, {wpe.get(), &wte});
  return Tensor();
}

void Embedding::own_parameters(std::vector<Parameter*>& out) {
  out.push_back(&wte);
  if (wpe) out.push_back(wpe.get());
}

}  // namespace braid
