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
      n_head_(cfg.n_head),
      n_kv_head_(cfg.kv_heads()),
      head_dim_(cfg.head_dim()),
      rope_theta_(cfg.rope_theta) {
  const int64_t C = cfg.n_embd, kv = n_kv_head_ * head_dim_;
  auto linear = [&](const char* name, int64_t in, int64_t out, bool bias) {
    add_slot(name, std::make_unique<Linear>(ctx, path + "." + name, in, out, bias));
  };
  if (llama_) {
    linear("q_proj", C, C, false);
    linear("k_proj", C, kv, false);
    linear("v_proj", C, kv, false);
    linear("o_proj", C, C, false);
  } else {
    linear("c_attn", C, 3 * C, true);
    linear("c_proj", C, C, true);
  }
}

void SelfAttention::project(ExecContext& ctx, const Tensor& x, MicroBatch* mb, InferState* st,
                            Tensor& q, Tensor& k, Tensor& v) {
  const int64_t B = x.dim(0), T = x.dim(1), C = x.dim(2);
  auto run = [&](size_t slot) {
    return mb ? child(slot).forward(x, *mb) : child(slot).infer(x, *st);
  };
  const int64_t pos = st ? st->pos : 0;
  if (llama_) {
    q = run(0).view({B, T, n_head_, head_dim_});
    k = run(1).view({B, T, n_kv_head_, head_dim_});
    v = run(2).view({B, T, n_kv_head_, head_dim_});
    rope_forward(ctx, q, pos, rope_theta_);
    rope_forward(ctx, k, pos, rope_theta_);
  } else {
    Tensor qkv = run(0);
    q = x.new_empty({B, T, n_head_, head_dim_}, x.dtype());
    k = x.new_empty({B, T, n_head_, head_dim_}, x.dtype());
    v = x.new_empty({B, T, n_head_, head_dim_}, x.dtype());
    Tensor q2 = q.view({B * T, C}), k2 = k.view({B * T, C}), v2 = v.view({B * T, C});
    split_columns(ctx, {&q2, &k2, &v2}, qkv.view({B * T, 3 * C}));
  }
}

Tensor SelfAttention::forward(const Tensor& x, MicroBatch& mb) {
  ExecContext& ctx = mb.ctx();
  const int64_t B = x.dim(0), T = x.dim(1), C = x.dim(2);
  Tensor q, k, v;
  project(ctx, x, &mb, nullptr, q, k, v);
  Tensor out = x.new_empty({B, T, n_head_, head_dim_}, x.dtype());
  Tensor lse = x.new_empty({B, n_head_, T}, DType::F32);
  attention_forward(ctx, out, lse, q, k, v);
  mb.push(q);
  mb.push(k);
  mb.push(v);
  mb.push(out);
  mb.push(lse);
  return out_proj().forward(out.view({B, T, C}), mb);
}

Tensor SelfAttention::backward(const Tensor& dy, MicroBatch& mb) {
  ExecContext& ctx = mb.ctx();
  const int64_t B = dy.dim(0), T = dy.dim(1), C = dy.dim(2);
  Tensor dout = out_proj().backward(dy, mb).view({B, T, n_head_, head_dim_});
  Tensor lse = mb.pop(), out = mb.pop(), v = mb.pop(), k = mb.pop(), q = mb.pop();
  Tensor dq = empty_like(q), dk = empty_like(k), dv = empty_like(v);
  attention_backward(ctx, dq, dk, dv, dout, q, k, v, out, lse);
  if (llama_) {
    rope_backward(ctx, dq, 0, rope_theta_);
    rope_backward(ctx, dk, 0, rope_theta_);
    const int64_t kv = n_kv_head_ * head_dim_;
    Tensor dx = child(2).backward(dv.view({B, T, kv}), mb);
    add_inplace(ctx, dx, child(1).backward(dk.view({B, T, kv}), mb));
    add_inplace(ctx, dx, child(0).backward(dq.view({B, T, C}), mb));
    return dx;
  }
  Tensor dqkv = dy.new_empty({B, T, 3 * C}, dy.dtype());
  Tensor dqkv2 = dqkv.view({B * T, 3 * C});
  const Tensor dq2 = dq.view({B * T, C}), dk2 = dk.view({B * T, C}), dv2 = dv.view({B * T, C});
  concat_columns(ctx, dqkv2, {&dq2, &dk2, &dv2});
  return child(0).backward(dqkv, mb);
}

Tensor SelfAttention::infer(const Tensor& x, InferState& st) {
  ExecContext& ctx = st.ctx;
  const int64_t Tn = x.dim(1), C = x.dim(2), pos = st.pos;
  BRAID_CHECK(st.cache, "SelfAttention::infer needs a KV cache");
  KVCache::Layer& cache = st.cache->layers.at(layer_);
  BRAID_CHECK(cache.k.defined(), "the KV cache has no layer {}", layer_);
  BRAID_CHECK(x.dim(0) == 1, "KV-cache decoding handles one sequence, got batch {}", x.dim(0));
  BRAID_CHECK(pos + Tn <= cache.k.dim(0), "KV cache holds {} positions, need {}", cache.k.dim(0),
              pos + Tn);
  Tensor q, k, v;
  project(ctx, x, nullptr, &st, q, k, v);
  copy_rows(ctx, cache.k, pos, k.view({Tn, n_kv_head_, head_dim_}));
  copy_rows(ctx, cache.v, pos, v.view({Tn, n_kv_head_, head_dim_}));
  const Tensor kc = cache.k.slice0(0, pos + Tn).view({1, pos + Tn, n_kv_head_, head_dim_});
  const Tensor vc = cache.v.slice0(0, pos + Tn).view({1, pos + Tn, n_kv_head_, head_dim_});
  Tensor out = x.new_empty({1, Tn, n_head_, head_dim_}, x.dtype());
  Tensor lse = x.new_empty({1, n_head_, Tn}, DType::F32);
  attention_forward(ctx, out, lse, q, kc, vc);
  return out_proj().infer(out.view({1, Tn, C}), st);
}

}  // namespace braid
