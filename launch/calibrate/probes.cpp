// Probe builders for `braid plan --calibrate` (see probes.h).
#include "launch/calibrate/probes.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "core/kernels/activation.h"
#include "core/kernels/attention.h"
#include "core/kernels/cross_entropy.h"
#include "core/kernels/elementwise.h"
#include "core/kernels/layernorm.h"
#include "core/models/block.h"
#include "core/random.h"
#include "launch/plan/cpu_model.h"
#include "launch/plan/model_math.h"
#include "optim/adamw.h"

namespace braid::plan::probes {

namespace {

Tensor randn(const Shape& shape, uint64_t stream) {
  Tensor t = Tensor::empty(shape);
  fill_normal(t, 1.0f, 7, stream);
  return t;
}

}  // namespace

// One real transformer block of `family` at width C (head_dim 64, 32 at C < 256; Llama with 4
// query heads per KV head), forward + backward on `tokens` tokens of 256: the kernels and
// shapes braid train runs. The probe's work is counted twice, read per kernel group: GEMM
// FLOPs (6 per matmul parameter per token) against the profiler's GEMM time, and the bytes
// block_elementwise_bytes_per_token counts against its element-wise time.

BlockProbe add_block_probe(Probes& probes, int64_t tokens, int C, bool llama) {
  ModelConfig m;
  m.family = llama ? "llama" : "gpt2";
  m.vocab_size = 64;
  m.context_length = 256;
  m.n_layer = 1;
  m.n_embd = C;
  m.n_head = C / (C < 256 ? 32 : 64);
  if (llama) m.n_kv_head = std::max(1, m.n_head / 4);
  m.validate();
  const int64_t T = 256, B = std::max<int64_t>(1, tokens / T);
  struct State {
    std::unique_ptr<Block> model;
    Tensor x, dy;
  };
  auto st = std::make_shared<State>();
  ExecContext* c = &probes.ctx();
  st->model = std::make_unique<Block>(*c, m, 0);
  std::vector<Parameter*> ps;
  st->model->collect_parameters(ps);
  for (Parameter* p : ps) {
    if (p->value.ndim() == 1) p->value.fill_(1.0f);
    else fill_normal(p->value, 0.02f, 7, hash_string(p->name));
  }
  st->x = randn({B, T, C}, 13);
  st->dy = randn({B, T, C}, 14);
  BlockProbe bp;
  const double n = static_cast<double>(B * T);
  bp.gemm_flops = 6.0 * static_cast<double>(block_matmul_params(m)) * n;
  bp.elementwise_bytes = block_elementwise_bytes_per_token(m) * n;
  bp.index = probes.add(
      [st, c] {
        MicroBatch mb(*c);
        st->model->forward(st->x, mb);
        st->model->backward(st->dy, mb);
      },
      1.0);
  return bp;
}

// The optimizer's per-step passes as the trainer runs them on `params` parameters in 48
// matrices: global gradient norm, clipping (it scales, as it does when it triggers) and AdamW.
// Work: the bytes of those passes, 10 fp32 arrays (norm reads g; clipping reads and writes g;
// AdamW reads p, g, m, v and writes p, m, v); zero_grad, the 11th, is left out so the gradients
// stay non-zero across calls.
size_t add_optimizer_probe(Probes& probes, int64_t params) {
  constexpr int kTensors = 48;
  const int64_t cols = 256, rows = std::max<int64_t>(1, params / (kTensors * cols));
  struct State {
    std::vector<std::unique_ptr<Parameter>> owned;
    std::vector<Parameter*> ps;
    std::unique_ptr<AdamW> opt;
  };
  auto st = std::make_shared<State>();
  for (int i = 0; i < kTensors; ++i) {
    auto p = std::make_unique<Parameter>(fmt::format("calibrate.{}.weight", i),
                                         probes.ctx().zeros({rows, cols}, DType::F32, MemCategory::Weights));
    fill_normal(p->value, 0.02f, 15, static_cast<uint64_t>(i));
    fill_normal(p->grad(), 1.0f, 16, static_cast<uint64_t>(i));
    st->ps.push_back(p.get());
    st->owned.push_back(std::move(p));
  }
  ExecContext* c = &probes.ctx();
  st->opt = std::make_unique<AdamW>(*c, st->ps, OptimConfig{});
  const double n = static_cast<double>(kTensors * rows * cols);
  return probes.add(
      [st, c] {
        const double norm = global_grad_norm(*c, st->ps);
        clip_grad_norm(*c, st->ps, norm, static_cast<float>(norm * 0.99999));
        st->opt->step(1e-4f);
      },
      10.0 * 4.0 * n);
}

// Causal attention forward + backward on `tokens` tokens of sequences of length T at n_embd
// C, in the kernel's own FLOPs; `group` query heads share each KV head.
size_t add_attention_probe(Probes& probes, int64_t tokens, int64_t T, int64_t D, int64_t group,
                           int64_t C) {
  const int64_t B = std::max<int64_t>(1, tokens / T), H = std::max<int64_t>(1, C / D);
  const int64_t Hkv = std::max<int64_t>(1, H / group);
  struct Buffers {
    Tensor q, k, v, out, lse, dout, dq, dk, dv;
  };
  auto b = std::make_shared<Buffers>();
  b->q = randn({B, T, H, D}, 1);
  b->k = randn({B, T, Hkv, D}, 2);
  b->v = randn({B, T, Hkv, D}, 3);
  b->out = Tensor::empty({B, T, H, D});
  b->lse = Tensor::empty({B, H, T});
  b->dout = randn({B, T, H, D}, 4);
  b->dq = Tensor::empty(b->q.shape());
  b->dk = Tensor::empty(b->k.shape());
  b->dv = Tensor::empty(b->v.shape());
  ModelConfig m;
  m.n_embd = static_cast<int>(C);
  m.n_head = static_cast<int>(H);
  return probes.add(
      [b, c = &probes.ctx()] {
        attention_forward(*c, b->out, b->lse, b->q, b->k, b->v);
        attention_backward(*c, b->dq, b->dk, b->dv, b->dout, b->q, b->k, b->v, b->out, b->lse);
      },
      attention_kernel_flops_per_token(m, T) * static_cast<double>(B * T));
}

// The fused LM head + cross-entropy, forward and backward, on N tokens: 6 V C FLOPs per token.
size_t add_lm_head_probe(Probes& probes, int64_t N, int64_t C, int64_t V) {
  struct Buffers {
    Tensor x, w, targets, losses, dx, dw;
  };
  auto b = std::make_shared<Buffers>();
  b->x = randn({N, C}, 5);
  b->w = randn({V, C}, 6);
  std::vector<int32_t> tv(N);
  for (int64_t i = 0; i < N; ++i) tv[i] = static_cast<int32_t>((i * 131) % V);
  b->targets = Tensor::from_vector_i32(tv, {N});
  b->losses = Tensor::empty({N});
  b->dx = Tensor::empty({N, C});
  b->dw = Tensor::zeros({V, C});
  const float scale = 1.0f / static_cast<float>(N);
  return probes.add(
      [b, scale, c = &probes.ctx()] {
        lm_head_cross_entropy(*c, b->losses, b->dx, b->dw, b->x, b->w, b->targets, scale);
      },
      6.0 * N * V * C);
}

// LayerNorm forward + backward and a residual add on N tokens at width 512: bytes read +
// written (LN forward 2C, LN backward 3C, add 3C elements per token).
size_t add_elementwise_probe(Probes& probes, int64_t N) {
  const int64_t C = 512;
  struct Buffers {
    Tensor x, y, dy, dx, mean, rstd, g, b, dg, db;
  };
  auto t = std::make_shared<Buffers>();
  t->x = randn({N, C}, 8);
  t->y = Tensor::empty({N, C});
  t->dy = randn({N, C}, 9);
  t->dx = Tensor::empty({N, C});
  t->mean = Tensor::empty({N});
  t->rstd = Tensor::empty({N});
  t->g = Tensor::empty({C});
  t->g.fill_(1.0f);
  t->b = Tensor::zeros({C});
  t->dg = Tensor::zeros({C});
  t->db = Tensor::zeros({C});
  return probes.add(
      [t, c = &probes.ctx()] {
        layernorm_forward(*c, t->y, t->mean, t->rstd, t->x, t->g, t->b, 1e-5f);
        layernorm_backward(*c, t->dx, t->dg, t->db, t->dy, t->x, t->g, t->mean, t->rstd);
        add_inplace(*c, t->y, t->dx);
      },
      4.0 * N * 8.0 * C);
}

// GELU (gpt2) or SwiGLU (llama) forward + backward on N tokens x MLP width 2048: elements.
size_t add_activation_probe(Probes& probes, int64_t N, bool swiglu) {
  const int64_t F = 2048;
  struct Buffers {
    Tensor a, u, dy, y, da, du;
  };
  auto t = std::make_shared<Buffers>();
  t->a = randn({N, F}, 10);
  t->u = randn({N, F}, 11);
  t->dy = randn({N, F}, 12);
  t->y = Tensor::empty({N, F});
  t->da = Tensor::empty({N, F});
  t->du = Tensor::empty({N, F});
  return probes.add(
      [t, swiglu, c = &probes.ctx()] {
        if (swiglu) {
          swiglu_forward(*c, t->y, t->a, t->u);
          swiglu_backward(*c, t->da, t->du, t->dy, t->a, t->u);
        } else {
          gelu_forward(*c, t->y, t->a);
          gelu_backward(*c, t->da, t->dy, t->a);
        }
      },
      static_cast<double>(N) * F);
}

// 100 calls of add_inplace on 16384 floats (one OpenMP region each): seconds per call, from
// which the byte time is subtracted afterwards to leave the fixed cost.
size_t add_call_probe(Probes& probes) {
  auto a = std::make_shared<Tensor>(Tensor::zeros({kCallProbeFloats}));
  auto b = std::make_shared<Tensor>(Tensor::zeros({kCallProbeFloats}));
  return probes.add(
      [a, b, c = &probes.ctx()] {
        for (int k = 0; k < 100; ++k) add_inplace(*c, *a, *b);
      },
      100.0);
}

// Stream-like copy over the OpenMP threads: bytes read plus bytes written.
size_t add_copy_probe(Probes& probes, size_t bytes) {
  const int64_t chunks = 64;
  const size_t chunk = bytes / chunks;
  auto src = std::make_shared<std::vector<char>>(bytes, 1);
  auto dst = std::make_shared<std::vector<char>>(bytes, 0);
  return probes.add(
      [src, dst, chunk] {
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < chunks; ++i)
          std::memcpy(dst->data() + i * chunk, src->data() + i * chunk, chunk);
      },
      2.0 * static_cast<double>(chunk * chunks));
}

}  // namespace braid::plan::probes
