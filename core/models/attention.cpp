// SelfAttention: projections, RoPE, the attention kernel, output projection.
#include "core/models/attention.h"

#include <cstring>

#include "core/kernels/attention.h"
#include "core/kernels/elementwise.h"
#include "core/kernels/rope.h"
#include "core/profile.h"

namespace braid {

namespace {

// qkv: (N, 3C) -> q, k, v: (N, C) each (the GPT-2 fused projection's column blocks).
void split_qkv(const Tensor& qkv, Tensor& q, Tensor& k, Tensor& v, int64_t C) {
  KernelTimer timer(KernelGroup::Elementwise);
  const int64_t N = qkv.numel() / (3 * C);
  const float* src = qkv.f32();
  float *pq = q.f32(), *pk = k.f32(), *pv = v.f32();
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const float* row = src + n * 3 * C;
    std::memcpy(pq + n * C, row, sizeof(float) * C);
    std::memcpy(pk + n * C, row + C, sizeof(float) * C);
    std::memcpy(pv + n * C, row + 2 * C, sizeof(float) * C);
  }
}

// The conjugate of split_qkv for gradients.
void merge_qkv(Tensor& dqkv, const Tensor& dq, const Tensor& dk, const Tensor& dv, int64_t C) {
  KernelTimer timer(KernelGroup::Elementwise);
  const int64_t N = dqkv.numel() / (3 * C);
  float* dst = dqkv.f32();
  const float *pq = dq.f32(), *pk = dk.f32(), *pv = dv.f32();
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    float* row = dst + n * 3 * C;
    std::memcpy(row, pq + n * C, sizeof(float) * C);
    std::memcpy(row + C, pk + n * C, sizeof(float) * C);
    std::memcpy(row + 2 * C, pv + n * C, sizeof(float) * C);
  }
}

}  // namespace

SelfAttention::SelfAttention(const ModelConfig& cfg, const std::string& prefix)
    : llama_(cfg.is_llama()),
      n_head_(cfg.n_head),
      n_kv_head_(cfg.kv_heads()),
      head_dim_(cfg.head_dim()),
      rope_theta_(cfg.rope_theta) {
  const int64_t C = cfg.n_embd, kv = n_kv_head_ * head_dim_;
  if (llama_) {
    q_proj = std::make_unique<Linear>(prefix + ".q_proj", C, C, false);
    k_proj = std::make_unique<Linear>(prefix + ".k_proj", C, kv, false);
    v_proj = std::make_unique<Linear>(prefix + ".v_proj", C, kv, false);
    o_proj = std::make_unique<Linear>(prefix + ".o_proj", C, C, false);
  } else {
    c_attn = std::make_unique<Linear>(prefix + ".c_attn", C, 3 * C, true);
    c_proj = std::make_unique<Linear>(prefix + ".c_proj", C, C, true);
  }
}

void SelfAttention::project(const Tensor& x, Saved* saved, int64_t pos_offset, Tensor& q,
                            Tensor& k, Tensor& v) {
  const int64_t B = x.dim(0), T = x.dim(1), C = x.dim(2);
  Saved scratch;
  Saved& s = saved ? *saved : scratch;
  if (llama_) {
    q = q_proj->forward(x, s).view({B, T, n_head_, head_dim_});
    k = k_proj->forward(x, s).view({B, T, n_kv_head_, head_dim_});
    v = v_proj->forward(x, s).view({B, T, n_kv_head_, head_dim_});
    rope_forward(q, pos_offset, rope_theta_);
    rope_forward(k, pos_offset, rope_theta_);
  } else {
    Tensor qkv = c_attn->forward(x, s);
    q = Tensor::empty({B, T, n_head_, head_dim_});
    k = Tensor::empty({B, T, n_head_, head_dim_});
    v = Tensor::empty({B, T, n_head_, head_dim_});
    split_qkv(qkv, q, k, v, C);
  }
}

Tensor SelfAttention::forward(const Tensor& x, Saved& saved) {
  const int64_t B = x.dim(0), T = x.dim(1), C = x.dim(2);
  Tensor q, k, v;
  project(x, &saved, 0, q, k, v);
  Tensor out = Tensor::empty({B, T, n_head_, head_dim_});
  Tensor lse = Tensor::empty({B, n_head_, T});
  attention_forward(out, lse, q, k, v);
  saved.push(q);
  saved.push(k);
  saved.push(v);
  saved.push(out);
  saved.push(lse);
  Linear& proj = llama_ ? *o_proj : *c_proj;
  return proj.forward(out.view({B, T, C}), saved);
}

Tensor SelfAttention::backward(const Tensor& dy, Saved& saved) {
  const int64_t B = dy.dim(0), T = dy.dim(1), C = dy.dim(2);
  Linear& proj = llama_ ? *o_proj : *c_proj;
  Tensor dout = proj.backward(dy, saved).view({B, T, n_head_, head_dim_});
  Tensor lse = saved.pop(), out = saved.pop(), v = saved.pop(), k = saved.pop(), q = saved.pop();
  Tensor dq = Tensor::empty(q.shape()), dk = Tensor::empty(k.shape()), dv = Tensor::empty(v.shape());
  attention_backward(dq, dk, dv, dout, q, k, v, out, lse);
  if (llama_) {
    rope_backward(dq, 0, rope_theta_);
    rope_backward(dk, 0, rope_theta_);
    const int64_t kv = n_kv_head_ * head_dim_;
    Tensor dx = v_proj->backward(dv.view({B, T, kv}), saved);
    add_inplace(dx, k_proj->backward(dk.view({B, T, kv}), saved));
    add_inplace(dx, q_proj->backward(dq.view({B, T, C}), saved));
    return dx;
  }
  Tensor dqkv = Tensor::empty({B, T, 3 * C});
  merge_qkv(dqkv, dq, dk, dv, C);
  return c_attn->backward(dqkv, saved);
}

Tensor SelfAttention::infer(const Tensor& x, KVCache::Layer& cache, int64_t pos) {
  const int64_t Tn = x.dim(1), C = x.dim(2);
  BRAID_CHECK(x.dim(0) == 1, "KV-cache decoding handles one sequence, got batch {}", x.dim(0));
  BRAID_CHECK(pos + Tn <= cache.k.dim(0), "KV cache holds {} positions, need {}", cache.k.dim(0),
              pos + Tn);
  Tensor q, k, v;
  project(x, nullptr, pos, q, k, v);
  const int64_t row = n_kv_head_ * head_dim_;
  std::memcpy(cache.k.f32() + pos * row, k.f32(), sizeof(float) * Tn * row);
  std::memcpy(cache.v.f32() + pos * row, v.f32(), sizeof(float) * Tn * row);
  const Tensor kc = cache.k.slice0(0, pos + Tn).view({1, pos + Tn, n_kv_head_, head_dim_});
  const Tensor vc = cache.v.slice0(0, pos + Tn).view({1, pos + Tn, n_kv_head_, head_dim_});
  Tensor out = Tensor::empty({1, Tn, n_head_, head_dim_});
  Tensor lse = Tensor::empty({1, n_head_, Tn});
  attention_forward(out, lse, q, kc, vc);
  Linear& proj = llama_ ? *o_proj : *c_proj;
  return proj.infer(out.view({1, Tn, C}));
}

void SelfAttention::collect_parameters(std::vector<Parameter*>& out) {
  if (llama_) {
    q_proj->collect_parameters(out);
    k_proj->collect_parameters(out);
    v_proj->collect_parameters(out);
    o_proj->collect_parameters(out);
  } else {
    c_attn->collect_parameters(out);
    c_proj->collect_parameters(out);
  }
}

}  // namespace braid
