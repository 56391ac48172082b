// Tensor-parallel attention, MLP, row-parallel linear and vocab-parallel embedding.
#include "parallel/tp_layers.h"

#include <algorithm>
#include <cstring>

#include "core/kernels/activation.h"
#include "core/kernels/attention.h"
#include "core/kernels/elementwise.h"
#include "core/kernels/linear.h"
#include "core/kernels/rope.h"
#include "parallel/sequence_parallel.h"

namespace braid {

namespace {
Shape with_last(const Shape& s, int64_t last) {
  Shape r = s;
  r.back() = last;
  return r;
}
void all_reduce_sum(Communicator& tp, Tensor& t) {
  if (tp.size() > 1) tp.all_reduce(t, ReduceOp::Sum).wait();
}
// `t` in f32: itself, or a widened copy (16-bit activations under mixed precision).
Tensor as_f32(ExecContext& ctx, const Tensor& t) {
  if (t.dtype() == DType::F32) return t;
  Tensor w = ctx.empty(t.shape(), DType::F32);
  cast(ctx, w, t);
  return w;
}
// The f32 sum `t` as `dtype` (16-bit activations are rounded once, after the sum).
Tensor as_dtype(ExecContext& ctx, const Tensor& t, DType dtype) {
  if (dtype == DType::F32) return t;
  Tensor n = ctx.empty(t.shape(), dtype);
  cast(ctx, n, t);
  return n;
}
// Entering a parallel region: the whole input. Under sequence parallelism the slices are
// gathered, and the projections that stash the gathered tensor keep the slice instead: their
// backward gathers it again.
Tensor enter_region(Communicator& tp, bool sp, const Tensor& x, MicroBatch& mb) {
  if (!sp) return x;
  ExecContext& ctx = mb.ctx();
  Tensor whole = seq_all_gather(ctx, tp, x);
  mb.recompute_later(whole, [&ctx, &tp, x] { return seq_all_gather(ctx, tp, x); });
  return whole;
}
// The backward of entering: each rank's part of the input gradient, summed (all-reduce), or
// summed and scattered to the slices (sequence parallelism).
Tensor entry_grad(Communicator& tp, bool sp, ExecContext& ctx, Tensor dx) {
  if (!sp) {
    all_reduce_sum(tp, dx);
    return dx;
  }
  return seq_reduce_scatter(ctx, tp, dx, dx.dtype());
}
}  // namespace

// ---- RowParallelLinear ----

RowParallelLinear::RowParallelLinear(const std::string& path, Tensor w, Tensor b, Communicator& tp,
                                     bool sequence_parallel)
    : Module(path), weight(path + ".weight", std::move(w)), tp_(tp), sp_(sequence_parallel) {
  if (b.defined()) bias = std::make_unique<Parameter>(path + ".bias", std::move(b));
}

Tensor RowParallelLinear::run(ExecContext& ctx, const Tensor& x) {
  const int64_t out = weight.value.dim(0);
  // Partial sums in f32 whatever the compute dtype, summed over the group in f32 and rounded
  // once, as one rank's GEMM would (twice the bytes of a 16-bit all-reduce, one rounding).
  Tensor y = x.new_empty(with_last(x.shape(), out), DType::F32);
  Tensor y2 = as_rows(y);
  // The bias once: group rank 0 adds it to its partial sum.
  const Tensor b = bias && tp_.rank() == 0 ? bias->value : Tensor();
  linear_forward(ctx, y2, as_rows(x), weight.value, b);
  if (sp_ && tp_.size() > 1) return seq_reduce_scatter(ctx, tp_, y, x.dtype());
  all_reduce_sum(tp_, y);
  return as_dtype(ctx, y, x.dtype());
}

Tensor RowParallelLinear::forward(const Tensor& x, MicroBatch& mb) {
  mb.push(x);
  return run(mb.ctx(), x);
}

Tensor RowParallelLinear::infer(const Tensor& x, InferState& st) { return run(st.ctx, x); }

Tensor RowParallelLinear::backward(const Tensor& dy_in, MicroBatch& mb) {
  const Tensor x = mb.pop();
  // Sequence parallelism: dy arrives as this rank's slice; the GEMMs need every position.
  const Tensor dy = sp_ && tp_.size() > 1 ? seq_all_gather(mb.ctx(), tp_, dy_in) : dy_in;
  return linear_layer_backward(mb, x, dy, weight, bias.get());
}

void RowParallelLinear::own_parameters(std::vector<Parameter*>& out) {
  out.push_back(&weight);
  if (bias) out.push_back(bias.get());
}

// ---- TpSelfAttention ----

TpSelfAttention::TpSelfAttention(const ModelConfig& cfg, const std::string& path, int tp_size,
                                 std::vector<std::unique_ptr<Module>> column,
                                 std::unique_ptr<Module> out, Communicator& tp,
                                 bool sequence_parallel)
    : Module(path),
      llama_(cfg.is_llama()),
      n_head_(cfg.n_head / tp_size),
      // kv heads split over the ranks, or (tp > n_kv_head) one replicated kv head per rank
      n_kv_head_(cfg.kv_heads() >= tp_size ? cfg.kv_heads() / tp_size : 1),
      head_dim_(cfg.head_dim()),
      rope_theta_(cfg.rope_theta),
      tp_(tp),
      sp_(sequence_parallel) {
  static const char* llama_names[] = {"q_proj", "k_proj", "v_proj"};
  for (size_t i = 0; i < column.size(); ++i)
    add_slot(llama_ ? llama_names[i] : "c_attn", std::move(column[i]));
  out_slot_ = add_slot(llama_ ? "o_proj" : "c_proj", std::move(out));
}

Tensor TpSelfAttention::forward(const Tensor& x_in, MicroBatch& mb) {
  ExecContext& ctx = mb.ctx();
  const Tensor x = enter_region(tp_, sp_, x_in, mb);
  const int64_t B = x.dim(0), T = x.dim(1), Cl = n_head_ * head_dim_;
  Tensor q, k, v;
  if (llama_) {
    q = child(0).forward(x, mb).view({B, T, n_head_, head_dim_});
    k = child(1).forward(x, mb).view({B, T, n_kv_head_, head_dim_});
    v = child(2).forward(x, mb).view({B, T, n_kv_head_, head_dim_});
    rope_forward(ctx, q, 0, rope_theta_);
    rope_forward(ctx, k, 0, rope_theta_);
  } else {
    // The c_attn shard's rows are this rank's q, k and v heads, in that order.
    Tensor qkv = child(0).forward(x, mb);
    q = x.new_empty({B, T, n_head_, head_dim_}, x.dtype());
    k = x.new_empty({B, T, n_head_, head_dim_}, x.dtype());
    v = x.new_empty({B, T, n_head_, head_dim_}, x.dtype());
    Tensor q2 = q.view({B * T, Cl}), k2 = k.view({B * T, Cl}), v2 = v.view({B * T, Cl});
    split_columns(ctx, {&q2, &k2, &v2}, qkv.view({B * T, 3 * Cl}));
  }
  Tensor out = x.new_empty({B, T, n_head_, head_dim_}, x.dtype());
  Tensor lse = x.new_empty({B, n_head_, T}, DType::F32);
  attention_forward(ctx, out, lse, q, k, v);
  mb.push(q);
  mb.push(k);
  mb.push(v);
  mb.push(out);
  mb.push(lse);
  return child(out_slot_).forward(out.view({B, T, Cl}), mb);
}

Tensor TpSelfAttention::backward(const Tensor& dy, MicroBatch& mb) {
  ExecContext& ctx = mb.ctx();
  // The output projection's input gradient covers every position (dy may be a slice).
  Tensor dout = child(out_slot_).backward(dy, mb);
  const int64_t B = dout.dim(0), T = dout.dim(1), Cl = n_head_ * head_dim_;
  dout = dout.view({B, T, n_head_, head_dim_});
  Tensor lse = mb.pop(), out = mb.pop(), v = mb.pop(), k = mb.pop(), q = mb.pop();
  Tensor dq = empty_like(q), dk = empty_like(k), dv = empty_like(v);
  attention_backward(ctx, dq, dk, dv, dout, q, k, v, out, lse);
  Tensor dx;
  if (llama_) {
    rope_backward(ctx, dq, 0, rope_theta_);
    rope_backward(ctx, dk, 0, rope_theta_);
    const int64_t kv = n_kv_head_ * head_dim_;
    dx = child(2).backward(dv.view({B, T, kv}), mb);
    add_inplace(ctx, dx, child(1).backward(dk.view({B, T, kv}), mb));
    add_inplace(ctx, dx, child(0).backward(dq.view({B, T, Cl}), mb));
  } else {
    Tensor dqkv = dy.new_empty({B, T, 3 * Cl}, dy.dtype());
    Tensor dqkv2 = dqkv.view({B * T, 3 * Cl});
    const Tensor dq2 = dq.view({B * T, Cl}), dk2 = dk.view({B * T, Cl}), dv2 = dv.view({B * T, Cl});
    concat_columns(ctx, dqkv2, {&dq2, &dk2, &dv2});
    dx = child(0).backward(dqkv, mb);
  }
  return entry_grad(tp_, sp_, ctx, dx);  // each rank has its heads' part of dx
}

Tensor TpSelfAttention::infer(const Tensor&, InferState&) {
  throw Error(
      fmt::format("{}: KV-cache decoding is not supported under tensor parallelism; "
                  "export the model and generate on one rank",
                  path()));
}

// ---- TpMLP ----

TpMLP::TpMLP(const ModelConfig& cfg, const std::string& path,
             std::vector<std::unique_ptr<Module>> column, std::unique_ptr<Module> out,
             Communicator& tp, bool sequence_parallel)
    : Module(path), llama_(cfg.is_llama()), tp_(tp), sp_(sequence_parallel) {
  static const char* llama_names[] = {"gate_proj", "up_proj"};
  for (size_t i = 0; i < column.size(); ++i)
    add_slot(llama_ ? llama_names[i] : "c_fc", std::move(column[i]));
  add_slot(llama_ ? "down_proj" : "c_proj", std::move(out));
}

Tensor TpMLP::forward(const Tensor& x_in, MicroBatch& mb) {
  ExecContext& ctx = mb.ctx();
  const Tensor x = enter_region(tp_, sp_, x_in, mb);
  if (llama_) {
    Tensor gate = child(0).forward(x, mb), up = child(1).forward(x, mb);
    Tensor h = empty_like(gate);
    Tensor h2 = as_rows(h);
    swiglu_forward(ctx, h2, as_rows(gate), as_rows(up));
    mb.push(gate);
    mb.push(up);
    return child(2).forward(h, mb);
  }
  Tensor pre = child(0).forward(x, mb);
  Tensor act = empty_like(pre);
  gelu_forward(ctx, act, pre);
  mb.push(pre);
  return child(1).forward(act, mb);
}

Tensor TpMLP::backward(const Tensor& dy, MicroBatch& mb) {
  ExecContext& ctx = mb.ctx();
  Tensor dx;
  if (llama_) {
    Tensor dh = child(2).backward(dy, mb);
    Tensor up = mb.pop(), gate = mb.pop();
    Tensor dgate = empty_like(gate), dup = empty_like(up);
    Tensor dgate2 = as_rows(dgate), dup2 = as_rows(dup);
    swiglu_backward(ctx, dgate2, dup2, as_rows(dh), as_rows(gate), as_rows(up));
    dx = child(1).backward(dup, mb);
    add_inplace(ctx, dx, child(0).backward(dgate, mb));
  } else {
    Tensor dact = child(1).backward(dy, mb);
    Tensor pre = mb.pop();
    gelu_backward(ctx, dact, dact, pre);
    dx = child(0).backward(dact, mb);
  }
  return entry_grad(tp_, sp_, ctx, dx);
}

Tensor TpMLP::infer(const Tensor& x_in, InferState& st) {
  ExecContext& ctx = st.ctx;
  const Tensor x = sp_ ? seq_all_gather(ctx, tp_, x_in) : x_in;
  if (llama_) {
    Tensor gate = child(0).infer(x, st), up = child(1).infer(x, st);
    Tensor h = empty_like(gate);
    Tensor h2 = as_rows(h);
    swiglu_forward(ctx, h2, as_rows(gate), as_rows(up));
    return child(2).infer(h, st);
  }
  Tensor h = child(0).infer(x, st);
  gelu_forward(ctx, h, h);
  return child(1).infer(h, st);
}

// ---- VocabParallelEmbedding ----

VocabParallelEmbedding::VocabParallelEmbedding(const std::string& path, Parameter wte_,
                                               std::unique_ptr<Parameter> wpe_, int64_t vocab,
                                               int64_t row_begin, Communicator& tp,
                                               bool sequence_parallel)
    : Module(path),
      wte(std::move(wte_)),
      wpe(std::move(wpe_)),
      vocab_(vocab),
      row_begin_(row_begin),
      tp_(tp),
      sp_(sequence_parallel) {}

Tensor VocabParallelEmbedding::infer(const Tensor& tokens, InferState& st) {
  BRAID_CHECK(tokens.device().is_cpu() && st.pos == 0,
              "the vocab-parallel embedding runs on the host, from position 0");
  const int64_t B = tokens.dim(0), T = tokens.dim(1), C = wte.value.dim(1);
  const int64_t rows = wte.value.dim(0);
  // Rows are gathered in f32 and summed over the group in f32, then rounded once to the
  // table's dtype (bf16/fp16 under mixed precision), as the one-rank embedding outputs it.
  Tensor out = st.ctx.zeros({B, T, C});
  const int32_t* tok = tokens.i32();
  const Tensor w32 = as_f32(st.ctx, wte.value);
  const float* w = w32.f32();
  const Tensor pos32 = wpe && tp_.rank() == 0 ? as_f32(st.ctx, wpe->value) : Tensor();
  const float* pos = pos32.defined() ? pos32.f32() : nullptr;
  BRAID_CHECK(!wpe || T <= wpe->value.dim(0), "position {} outside the table", T - 1);
  float* o = out.f32();
  for (int64_t i = 0; i < B * T; ++i)
    BRAID_CHECK(tok[i] >= 0 && tok[i] < vocab_, "token id {} outside the vocabulary [0, {})",
                tok[i], vocab_);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < B * T; ++i) {
    const int64_t t = tok[i];
    float* row = o + i * C;
    const int64_t local = t - row_begin_;
    if (local >= 0 && local < rows) std::memcpy(row, w + local * C, sizeof(float) * C);
    if (pos)
      for (int64_t c = 0; c < C; ++c) row[c] += pos[(i % T) * C + c];
  }
  if (sp_ && tp_.size() > 1) return seq_reduce_scatter(st.ctx, tp_, out, wte.value.dtype());
  all_reduce_sum(tp_, out);
  return as_dtype(st.ctx, out, wte.value.dtype());
}

Tensor VocabParallelEmbedding::forward(const Tensor& tokens, MicroBatch& mb) {
  mb.push(tokens);
  InferState st{mb.ctx()};
  return infer(tokens, st);
}

Tensor VocabParallelEmbedding::backward(const Tensor& dx, MicroBatch& mb) {
  Tensor tokens = mb.pop();
  const int64_t B = tokens.dim(0), T = tokens.dim(1), C = wte.value.dim(1);
  const int64_t rows = wte.value.dim(0);
  const int32_t* tok = tokens.i32();
  // Sequence parallelism: every rank needs the gradient of every position for its rows.
  const Tensor dx_all = sp_ && tp_.size() > 1 ? seq_all_gather(mb.ctx(), tp_, dx) : dx;
  const Tensor dx32 = as_f32(mb.ctx(), dx_all);
  const float* d = dx32.f32();
  // Threads split the columns: every gradient element still sums its tokens in position
  // order, as one thread does (several positions may hold the same token).
  constexpr int64_t kCols = 16;
  const int64_t col_blocks = (C + kCols - 1) / kCols;
  if (wte.trainable) {
    float* g = wte.grad().f32();
#pragma omp parallel for schedule(static)
    for (int64_t cb = 0; cb < col_blocks; ++cb) {
      const int64_t c0 = cb * kCols, c1 = std::min(C, c0 + kCols);
      for (int64_t i = 0; i < B * T; ++i) {
        const int64_t local = tok[i] - row_begin_;
        if (local < 0 || local >= rows) continue;
        for (int64_t c = c0; c < c1; ++c) g[local * C + c] += d[i * C + c];
      }
    }
  }
  // dx is the same on every rank, so the replicated position table's gradient is too.
  if (wpe && wpe->trainable) {
    float* g = wpe->grad().f32();
#pragma omp parallel for schedule(static)
    for (int64_t cb = 0; cb < col_blocks; ++cb) {
      const int64_t c0 = cb * kCols, c1 = std::min(C, c0 + kCols);
      for (int64_t i = 0; i < B * T; ++i)
        for (int64_t c = c0; c < c1; ++c) g[(i % T) * C + c] += d[i * C + c];
    }
  }
  if (wpe && wpe->trainable) mb.grad_ready(*wpe);
  if (wte.trainable) mb.grad_ready(wte);
  return Tensor();
}

void VocabParallelEmbedding::own_parameters(std::vector<Parameter*>& out) {
  out.push_back(&wte);
  if (wpe) out.push_back(wpe.get());
}

}  // namespace braid
