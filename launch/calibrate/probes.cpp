// Probe builders for `braid plan --calibrate` (see probes.h).
#include "launch/calibrate/probes.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "core/kernels/activation.h"
#include "core/kernels/attention.h"
#include "core/kernels/cross_entropy.h"
#include "core/kernels/cuda/runtime.h"
#include "core/kernels/elementwise.h"
#include "core/kernels/gemm.h"
#include "core/kernels/layernorm.h"
#include "core/kernels/linear.h"
#include "core/kernels/optimizer.h"
#include "core/models/block.h"
#include "core/random.h"
#include "launch/plan/cpu_model.h"
#include "launch/plan/model_math.h"

namespace braid::plan::probes {

namespace {

// Tensors on the probes' device (a GPU's get the host's values).
Tensor randn(ExecContext& c, const Shape& shape, uint64_t stream) {
  Tensor t = c.empty(shape);
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
    if (p->value.ndim() == 1)
      p->value.fill_(1.0f);
    else
      fill_normal(p->value, 0.02f, 7, hash_string(p->name));
  }
  st->x = randn(*c, {B, T, C}, 13);
  st->dy = randn(*c, {B, T, C}, 14);
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
// matrices, with the kernels optim/adamw.cpp calls per tensor: global gradient norm
// (sum_squares) and AdamW (adamw_update, with the clip factor applied inside it, as when
// clipping triggers). Work: the bytes of those passes, 8 fp32 arrays (norm reads g; AdamW reads
// p, g, m, v and writes p, m, v). zero_grad writes nothing of its own: the step's first
// weight-gradient contributions overwrite the gradients.
size_t add_optimizer_probe(Probes& probes, int64_t params) {
  constexpr int kTensors = 48;
  const int64_t cols = 256, rows = std::max<int64_t>(1, params / (kTensors * cols));
  struct Slot {
    Tensor w, g, m, v;
  };
  auto st = std::make_shared<std::vector<Slot>>();
  ExecContext* c = &probes.ctx();
  for (int i = 0; i < kTensors; ++i) {
    Slot s{c->zeros({rows, cols}, DType::F32, MemCategory::Weights),
           c->zeros({rows, cols}, DType::F32, MemCategory::Grads),
           c->zeros({rows, cols}, DType::F32, MemCategory::OptimizerState),
           c->zeros({rows, cols}, DType::F32, MemCategory::OptimizerState)};
    fill_normal(s.w, 0.02f, 15, static_cast<uint64_t>(i));
    fill_normal(s.g, 1.0f, 16, static_cast<uint64_t>(i));
    st->push_back(std::move(s));
  }
  // AdamW's defaults (betas 0.9, 0.95, eps 1e-8, weight decay 0.1) at step 1, lr 1e-4.
  const float lr = 1e-4f;
  const AdamWStep k0{0.9f,     0.95f, 1e-8f, lr / (1.0f - 0.9f), 1.0f / std::sqrt(1.0f - 0.95f),
                     lr * 0.1f};
  const double n = static_cast<double>(kTensors * rows * cols);
  return probes.add(
      [st, c, k0] {
        std::vector<Tensor> grads;
        for (Slot& s : *st) grads.push_back(s.g);
        double sq = 0;
        for (double q : sum_squares_each(*c, grads)) sq += q;
        const double norm = std::sqrt(sq);
        AdamWStep k = k0;
        k.grad_scale = static_cast<float>(norm * 0.99999 / (norm + 1e-6));
        for (Slot& s : *st) adamw_update(*c, s.w, s.m, s.v, s.g, k);
      },
      8.0 * 4.0 * n);
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
  ExecContext& c = probes.ctx();
  b->q = randn(c, {B, T, H, D}, 1);
  b->k = randn(c, {B, T, Hkv, D}, 2);
  b->v = randn(c, {B, T, Hkv, D}, 3);
  b->out = c.empty({B, T, H, D});
  b->lse = c.empty({B, H, T});
  b->dout = randn(c, {B, T, H, D}, 4);
  b->dq = c.empty(b->q.shape());
  b->dk = c.empty(b->k.shape());
  b->dv = c.empty(b->v.shape());
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
  ExecContext& c = probes.ctx();
  b->x = randn(c, {N, C}, 5);
  b->w = randn(c, {V, C}, 6);
  std::vector<int32_t> tv(N);
  for (int64_t i = 0; i < N; ++i) tv[i] = static_cast<int32_t>((i * 131) % V);
  b->targets = c.to_device(Tensor::from_vector_i32(tv, {N}));
  b->losses = c.empty({N});
  b->dx = c.empty({N, C});
  b->dw = c.zeros({V, C});
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
  ExecContext& c = probes.ctx();
  t->x = randn(c, {N, C}, 8);
  t->y = c.empty({N, C});
  t->dy = randn(c, {N, C}, 9);
  t->dx = c.empty({N, C});
  t->mean = c.empty({N});
  t->rstd = c.empty({N});
  t->g = c.empty({C});
  t->g.fill_(1.0f);
  t->b = c.zeros({C});
  t->dg = c.zeros({C});
  t->db = c.zeros({C});
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
  ExecContext& c = probes.ctx();
  t->a = randn(c, {N, F}, 10);
  t->u = randn(c, {N, F}, 11);
  t->dy = randn(c, {N, F}, 12);
  t->y = c.empty({N, F});
  t->da = c.empty({N, F});
  t->du = c.empty({N, F});
  return probes.add(
      [t, swiglu, c = &probes.ctx()] {
        if (swiglu) {
          swiglu_forward(*c, t->y, t->a, t->u);
          swiglu_backward(*c, t->da, t->du, t->dy, t->a, t->u);
        } else {
          // As training runs it: the derivative kept (in u, not over a, so every call sees
          // the same input), then a multiply.
          gelu_forward_with_derivative(*c, t->y, t->u, t->a);
          gelu_backward_with_derivative(*c, t->da, t->dy, t->u);
        }
      },
      static_cast<double>(N) * F);
}

// 100 calls of add_inplace on 16384 floats (one OpenMP region each): seconds per call, from
// which the byte time is subtracted afterwards to leave the fixed cost.
size_t add_call_probe(Probes& probes) {
  auto a = std::make_shared<Tensor>(probes.ctx().zeros({kCallProbeFloats}));
  auto b = std::make_shared<Tensor>(probes.ctx().zeros({kCallProbeFloats}));
  return probes.add(
      [a, b, c = &probes.ctx()] {
        for (int k = 0; k < 100; ++k) add_inplace(*c, *a, *b);
      },
      100.0);
}

// Stream-like copy over the OpenMP threads (one cudaMemcpyAsync device to device on a GPU):
// bytes read plus bytes written.
size_t add_copy_probe(Probes& probes, size_t bytes) {
  ExecContext& c = probes.ctx();
  if (!c.device().is_cpu()) {
    const int64_t floats = static_cast<int64_t>(bytes / sizeof(float));
    auto src = std::make_shared<Tensor>(c.zeros({floats}));
    auto dst = std::make_shared<Tensor>(c.zeros({floats}));
    return probes.add(
        [src, dst, s = c.stream().handle] {
          cuda::copy_async(dst->raw(), src->raw(), src->nbytes(), s);
        },
        2.0 * static_cast<double>(src->nbytes()));
  }
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

size_t add_square_gemm_probe(Probes& probes, int64_t n, bool use_bf16) {
  ExecContext& c = probes.ctx();
  const double flops =
      2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
  if (!c.device().is_cpu()) {
    struct Buffers {
      Tensor x, w, y, none;
    };
    auto b = std::make_shared<Buffers>();
    const DType dt = use_bf16 ? DType::BF16 : DType::F32;
    b->x = randn(c, {n, n}, 17).to(dt);
    b->w = randn(c, {n, n}, 18).to(dt);
    b->y = c.empty({n, n}, dt);
    return probes.add([b, cp = &c] { linear_forward(*cp, b->y, b->x, b->w, b->none); }, flops);
  }
  auto sq = std::make_shared<std::vector<float>>(3 * n * n, 0.25f);  // A, B, C of (n, n)
  if (!use_bf16)
    return probes.add(
        [sq, n, cp = &c] {
          float* p = sq->data();
          gemm_f32(*cp, false, false, n, n, n, 1.0f, p, n, p + n * n, n, 0.0f, p + 2 * n * n, n);
        },
        flops);
  auto sqb = std::make_shared<std::vector<bf16>>(2 * n * n, float_to_bf16(0.25f));
  return probes.add(
      [sq, sqb, n, cp = &c] {
        const bf16* p = sqb->data();
        gemm_bf16(*cp, false, false, n, n, n, 1.0f, p, n, p + n * n, n, 0.0f,
                  sq->data() + 2 * n * n, n);
      },
      flops);
}

}  // namespace braid::plan::probes
