// Linear, LayerNorm, RMSNorm and Embedding: thin owners of parameters around the kernels.
#include "core/models/layers.h"

#include "core/kernels/elementwise.h"
#include "core/kernels/embedding.h"
#include "core/kernels/layernorm.h"
#include "core/kernels/linear.h"
#include "core/kernels/rmsnorm.h"

namespace braid {

Tensor rounded(ExecContext& ctx, const Tensor& t, DType dtype) {
  if (t.dtype() == dtype) return t;
  Tensor r = ctx.empty(t.shape(), dtype);
  cast(ctx, r, t);
  return r;
}

Tensor as_rows(const Tensor& x) { return x.view({-1, x.dim(-1)}); }

namespace {
thread_local int g_deferred_weights = 0;
}  // namespace

DeferredWeights::DeferredWeights() { ++g_deferred_weights; }
DeferredWeights::~DeferredWeights() { --g_deferred_weights; }

Tensor weight_tensor(ExecContext& ctx, const Shape& shape, float value) {
  if (g_deferred_weights > 0)
    return Tensor::meta(ctx.allocator_ptr(), shape, DType::F32, MemCategory::Weights);
  Tensor t = ctx.zeros(shape, DType::F32, MemCategory::Weights);
  if (value != 0.0f) t.fill_(value);
  return t;
}

namespace {

// Reports params (already in reverse order of use) ready on mb.
void report_ready(MicroBatch& mb, std::initializer_list<Parameter*> params) {
  for (Parameter* p : params)
    if (p && p->trainable) mb.grad_ready(*p);
}
}  // namespace

// ---- Linear ----

Linear::Linear(ExecContext& ctx, const std::string& path, int64_t in, int64_t out, bool has_bias)
    : Module(path), weight(path + ".weight", weight_tensor(ctx, {out, in})) {
  if (has_bias) bias = std::make_unique<Parameter>(path + ".bias", weight_tensor(ctx, {out}));
}

void Linear::reduce_output(std::unique_ptr<Module> region, bool add_bias) {
  BRAID_CHECK(!region_, "{}: the output is already reduced", path());
  region_ = &child(add_slot("output_region", std::move(region)));
  bias_in_partial_ = add_bias;
}

std::unique_ptr<Module> Linear::take_output_region(bool* add_bias) {
  *add_bias = bias_in_partial_;
  if (!region_) return nullptr;
  region_ = nullptr;
  return take_slot("output_region");
}

Tensor Linear::product(ExecContext& ctx, const Tensor& x) const {
  // A partial sum stays in f32 whatever the compute dtype: it is summed over the group in f32
  // and rounded once, as one rank's GEMM would.
  Tensor y = x.new_empty(with_last(x.shape(), out_features()), region_ ? DType::F32 : x.dtype());
  Tensor y2 = as_rows(y);
  const bool with_bias = bias && (!region_ || bias_in_partial_);
  linear_forward(ctx, y2, as_rows(x), weight.value, with_bias ? bias->value : Tensor());
  return y;
}

Tensor Linear::infer(const Tensor& x, InferState& st) {
  Tensor y = product(st.ctx, x);
  if (!region_) return y;
  return rounded(st.ctx, region_->infer(y, st), x.dtype());
}

Tensor Linear::forward(const Tensor& x, MicroBatch& mb) {
  mb.push(x);
  Tensor y = product(mb.ctx(), x);
  if (!region_) return y;
  return rounded(mb.ctx(), region_->forward(y, mb), x.dtype());
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
  // A step's first contribution writes the gradients (their zeroing deferred by zero_grad)
  // instead of adding onto zeros: one pass less over each, and the GEMM reads no old values.
  auto work = [&ctx, &weight, bias, dy2, x2 = as_rows(x), train_w, train_b] {
    bool fresh_w = true, fresh_b = true;
    Tensor dw = train_w ? weight.grad_for_overwrite(&fresh_w) : Tensor();
    Tensor db = train_b ? bias->grad_for_overwrite(&fresh_b) : Tensor();
    const bool overwrite = fresh_w && fresh_b;
    // One mode for both: one that is not fresh makes the other add onto its zeros.
    if (!overwrite && train_w && fresh_w) zero(ctx, dw);
    if (!overwrite && train_b && fresh_b) zero(ctx, db);
    linear_backward_weight(ctx, dw, db, dy2, x2, overwrite);
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

Tensor Linear::backward(const Tensor& dy_in, MicroBatch& mb) {
  // The region's backward first: it pops what its forward pushed after x.
  const Tensor dy = region_ ? region_->backward(dy_in, mb) : dy_in;
  const Tensor x = mb.pop();
  return linear_layer_backward(mb, x, dy, weight, bias.get());
}

void Linear::own_parameters(std::vector<Parameter*>& out) {
  out.push_back(&weight);
  if (bias) out.push_back(bias.get());
}

bool is_linear(const Module& m) { return dynamic_cast<const Linear*>(&m) != nullptr; }

// ---- LayerNorm ----

LayerNorm::LayerNorm(ExecContext& ctx, const std::string& path, int64_t dim, float eps_)
    : Module(path),
      weight(path + ".weight", weight_tensor(ctx, {dim}, 1.0f)),
      bias(path + ".bias", weight_tensor(ctx, {dim})),
      eps(eps_) {}

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
    : Module(path), weight(path + ".weight", weight_tensor(ctx, {dim}, 1.0f)), eps(eps_) {}

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

void Embedding::shard_rows(int64_t row_begin, int64_t vocab, bool add_positions,
                           std::unique_ptr<Module> region) {
  BRAID_CHECK(!region_, "{}: the table is already sharded", path());
  region_ = &child(add_slot("output_region", std::move(region)));
  row_begin_ = row_begin;
  vocab_ = vocab;
  add_positions_ = add_positions;
}

Tensor Embedding::lookup(ExecContext& ctx, const Tensor& tokens, int64_t pos,
                         const Tensor& sample_starts) const {
  if (sample_starts.defined() && wpe) {
    // Packed samples: each one's learned positions start at 0.
    Tensor out;
    for (const SampleSpan& s : sample_spans(sample_starts)) {
      const Tensor part = lookup(ctx, span_view(tokens, s), 0, Tensor());
      if (!out.defined())
        out = ctx.empty({tokens.dim(0), tokens.dim(1), part.dim(2)}, part.dtype());
      span_view(out, s).copy_from(part);
    }
    return out;
  }
  if (region_) {
    // This rank's rows (and the positions, once over the group) as an f32 partial sum.
    Tensor part = ctx.empty({tokens.dim(0), tokens.dim(1), wte.value.dim(1)});
    const Tensor p = wpe && add_positions_ ? wpe->value : Tensor();
    embedding_rows_forward(ctx, part, tokens, wte.value, p, row_begin_, vocab_, pos);
    return part;
  }
  // Activations are stored in the weights' dtype (bf16/f16 under mixed precision).
  Tensor out = ctx.empty({tokens.dim(0), tokens.dim(1), wte.value.dim(1)}, wte.value.dtype());
  embedding_forward(ctx, out, tokens, wte.value, wpe ? wpe->value : Tensor(), pos);
  return out;
}

Tensor Embedding::infer(const Tensor& tokens, InferState& st) {
  Tensor y = lookup(st.ctx, tokens, st.pos, st.sample_starts);
  if (!region_) return y;
  return rounded(st.ctx, region_->infer(y, st), wte.value.dtype());
}

Tensor Embedding::forward(const Tensor& tokens, MicroBatch& mb) {
  mb.push(tokens);
  Tensor y = lookup(mb.ctx(), tokens, 0, mb.sample_starts);
  if (!region_) return y;
  // The partial sum completed by the region, rounded once to the table's dtype.
  return rounded(mb.ctx(), region_->forward(y, mb), wte.value.dtype());
}

Tensor Embedding::backward(const Tensor& dx_in, MicroBatch& mb) {
  // The region's backward first: it pops what its forward pushed after the tokens. Every rank
  // needs the gradient of every position for its rows (the region gathers the slices under
  // sequence parallelism); dx is the same on every rank, so the replicated position table's
  // gradient is too.
  const Tensor dx = region_ ? region_->backward(dx_in, mb) : dx_in;
  Tensor tokens = mb.pop();
  Tensor dwte = wte.trainable ? wte.grad() : Tensor();
  Tensor dwpe = wpe && wpe->trainable ? wpe->grad() : Tensor();
  if (mb.sample_starts.defined() && dwpe.defined()) {
    // Packed samples: the position table's gradient sample by sample (positions from 0).
    Tensor none;
    for (const SampleSpan& s : sample_spans(mb.sample_starts)) {
      const Tensor dxs = span_view(dx, s), ts = span_view(tokens, s);
      if (region_)
        embedding_rows_backward(mb.ctx(), none, dwpe, dxs, ts, row_begin_);
      else
        embedding_backward(mb.ctx(), none, dwpe, dxs, ts, 0);
    }
    dwpe = Tensor();
  }
  if (region_)
    embedding_rows_backward(mb.ctx(), dwte, dwpe, dx, tokens, row_begin_);
  else if (dwte.defined() || dwpe.defined())  // frozen tables: no scatter at all
    embedding_backward(mb.ctx(), dwte, dwpe, dx, tokens, 0);
  report_ready(mb, {wpe.get(), &wte});
  return Tensor();
}

void Embedding::own_parameters(std::vector<Parameter*>& out) {
  out.push_back(&wte);
  if (wpe) out.push_back(wpe.get());
}

}  // namespace braid
