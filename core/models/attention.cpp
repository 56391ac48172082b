// SelfAttention: projections, RoPE, the attention kernel, output projection.
#include "core/models/attention.h"

#include "core/kernels/attention.h"
#include "core/kernels/elementwise.h"
#include "core/kernels/rope.h"

namespace braid {

SelfAttention::SelfAttention(ExecContext& ctx, const ModelConfig& cfg, const std::string& path,
                             int layer)
    : Module(path),
      llama_(cfg.is_llama()),
      layer_(layer),
      head_dim_(cfg.head_dim()),
      rope_(cfg.rope()),
      window_(cfg.sliding_window) {
  const int64_t C = cfg.n_embd, kv = cfg.kv_heads() * head_dim_;
  auto linear = [&](const char* name, int64_t in, int64_t out, bool bias) {
    add_slot(name, std::make_unique<Linear>(ctx, path + "." + name, in, out, bias));
  };
  if (llama_) {
    linear("q_proj", C, C, cfg.qkv_bias);
    linear("k_proj", C, kv, cfg.qkv_bias);
    linear("v_proj", C, kv, cfg.qkv_bias);
    linear("o_proj", C, C, false);
  } else {
    linear("c_attn", C, 3 * C, true);
    linear("c_proj", C, C, true);
  }
}

void SelfAttention::set_input_region(std::unique_ptr<Module> region) {
  BRAID_CHECK(!region_, "{}: the input region is already set", path());
  region_ = &child(add_slot("input_region", std::move(region)));
}

void SelfAttention::project(ExecContext& ctx, const Tensor& x, MicroBatch* mb, InferState* st,
                            Tensor& q, Tensor& k, Tensor& v) {
  const int64_t B = x.dim(0), T = x.dim(1), D = head_dim_;
  auto run = [&](size_t slot) {
    return mb ? child(slot).forward(x, *mb) : child(slot).infer(x, *st);
  };
  const int64_t pos = st ? st->pos : 0;
  if (llama_) {
    // (B, T, heads * D): the heads are the projection's.
    q = run(0);
    q = q.view({B, T, q.dim(2) / D, D});
    k = run(1);
    k = k.view({B, T, k.dim(2) / D, D});
    v = run(2);
    v = v.view({B, T, v.dim(2) / D, D});
    if (mb && mb->sample_starts.defined()) {
      // Packed samples: each one's positions start at 0.
      for (const SampleSpan& s : sample_spans(mb->sample_starts)) {
        Tensor qs = span_view(q, s), ks = span_view(k, s);
        rope_forward(ctx, qs, 0, rope_);
        rope_forward(ctx, ks, 0, rope_);
      }
    } else {
      rope_forward(ctx, q, pos, rope_);
      rope_forward(ctx, k, pos, rope_);
    }
  } else {
    // The fused projection's rows are its q, k and v heads, in that order.
    Tensor qkv = run(0);
    const int64_t Cl = qkv.dim(2) / 3, H = Cl / D;
    q = x.new_empty({B, T, H, D}, x.dtype());
    k = x.new_empty({B, T, H, D}, x.dtype());
    v = x.new_empty({B, T, H, D}, x.dtype());
    Tensor q2 = q.view({B * T, Cl}), k2 = k.view({B * T, Cl}), v2 = v.view({B * T, Cl});
    split_columns(ctx, {&q2, &k2, &v2}, qkv.view({B * T, 3 * Cl}));
  }
}

Tensor SelfAttention::forward(const Tensor& x_in, MicroBatch& mb) {
  ExecContext& ctx = mb.ctx();
  const Tensor x = region_ ? region_->forward(x_in, mb) : x_in;
  const int64_t B = x.dim(0), T = x.dim(1);
  if (!llama_) {
    // GPT-2: the kernel reads q, k and v heads straight from the fused projection's rows.
    Tensor qkv = child(0).forward(x, mb);  // (B, T, 3 * local width)
    const int64_t H = qkv.dim(2) / 3 / head_dim_;
    Tensor out = x.new_empty({B, T, H, head_dim_}, x.dtype());
    Tensor lse = x.new_empty({B, H, T}, DType::F32);
    attention_forward_packed(ctx, out, lse, qkv, H, window_, mb.sample_starts);
    mb.push(qkv);
    mb.push(out);
    mb.push(lse);
    return out_proj().forward(out.view({B, T, H * head_dim_}), mb);
  }
  Tensor q, k, v;
  project(ctx, x, &mb, nullptr, q, k, v);
  const int64_t H = q.dim(2);
  Tensor out = x.new_empty({B, T, H, head_dim_}, x.dtype());
  Tensor lse = x.new_empty({B, H, T}, DType::F32);
  attention_forward(ctx, out, lse, q, k, v, window_, mb.sample_starts);
  mb.push(q);
  mb.push(k);
  mb.push(v);
  mb.push(out);
  mb.push(lse);
  return out_proj().forward(out.view({B, T, H * head_dim_}), mb);
}

Tensor SelfAttention::backward(const Tensor& dy, MicroBatch& mb) {
  ExecContext& ctx = mb.ctx();
  // The output projection's input gradient covers every position (dy may be a slice of them).
  Tensor dout = out_proj().backward(dy, mb);
  if (!llama_) {
    Tensor lse = mb.pop(), out = mb.pop(), qkv = mb.pop();
    Tensor dqkv = empty_like(qkv);
    attention_backward_packed(ctx, dqkv, dout.view(out.shape()), qkv, out, lse, out.dim(2), window_,
                              mb.sample_starts);
    Tensor dx = child(0).backward(dqkv, mb);
    return region_ ? region_->backward(dx, mb) : dx;
  }
  Tensor lse = mb.pop(), out = mb.pop(), v = mb.pop(), k = mb.pop(), q = mb.pop();
  const int64_t B = q.dim(0), T = q.dim(1), Cq = q.dim(2) * head_dim_;
  dout = dout.view(q.shape());
  Tensor dq = empty_like(q), dk = empty_like(k), dv = empty_like(v);
  attention_backward(ctx, dq, dk, dv, dout, q, k, v, out, lse, window_, mb.sample_starts);
  // Llama: RoPE's backward on dq and dk, then the three projections.
  if (mb.sample_starts.defined()) {
    for (const SampleSpan& s : sample_spans(mb.sample_starts)) {
      Tensor dqs = span_view(dq, s), dks = span_view(dk, s);
      rope_backward(ctx, dqs, 0, rope_);
      rope_backward(ctx, dks, 0, rope_);
    }
  } else {
    rope_backward(ctx, dq, 0, rope_);
    rope_backward(ctx, dk, 0, rope_);
  }
  const int64_t kv = k.dim(2) * head_dim_;
  Tensor dx = child(2).backward(dv.view({B, T, kv}), mb);
  add_inplace(ctx, dx, child(1).backward(dk.view({B, T, kv}), mb));
  add_inplace(ctx, dx, child(0).backward(dq.view({B, T, Cq}), mb));
  return region_ ? region_->backward(dx, mb) : dx;
}

Tensor SelfAttention::infer(const Tensor& x_in, InferState& st) {
  ExecContext& ctx = st.ctx;
  const Tensor x = region_ ? region_->infer(x_in, st) : x_in;
  const int64_t Tn = x.dim(1), pos = st.pos;
  BRAID_CHECK(st.cache, "SelfAttention::infer needs a KV cache");
  KVCache::Layer& cache = st.cache->layers.at(layer_);
  BRAID_CHECK(cache.k.defined(), "the KV cache has no layer {}", layer_);
  BRAID_CHECK(x.dim(0) == 1, "KV-cache decoding handles one sequence, got batch {}", x.dim(0));
  BRAID_CHECK(pos + Tn <= cache.k.dim(0), "KV cache holds {} positions, need {}", cache.k.dim(0),
              pos + Tn);
  Tensor q, k, v;
  project(ctx, x, nullptr, &st, q, k, v);
  const int64_t H = q.dim(2), Hkv = k.dim(2);
  BRAID_CHECK(cache.k.dim(1) == Hkv,
              "{}: the KV cache holds {} key/value heads, this layer computes {}", path(),
              cache.k.dim(1), Hkv);
  copy_rows(ctx, cache.k, pos, k.view({Tn, Hkv, head_dim_}));
  copy_rows(ctx, cache.v, pos, v.view({Tn, Hkv, head_dim_}));
  const Tensor kc = cache.k.slice0(0, pos + Tn).view({1, pos + Tn, Hkv, head_dim_});
  const Tensor vc = cache.v.slice0(0, pos + Tn).view({1, pos + Tn, Hkv, head_dim_});
  Tensor out = x.new_empty({1, Tn, H, head_dim_}, x.dtype());
  Tensor lse = x.new_empty({1, H, Tn}, DType::F32);
  attention_forward(ctx, out, lse, q, kc, vc, window_);
  return out_proj().infer(out.view({1, Tn, H * head_dim_}), st);
}

}  // namespace braid
