// Machine measurements for the device profile (the planner's only kernel calls).
#include "launch/plan/calibrate.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "core/kernels/activation.h"
#include "core/kernels/attention.h"
#include "core/kernels/cross_entropy.h"
#include "core/kernels/elementwise.h"
#include "core/kernels/gemm.h"
#include "core/kernels/layernorm.h"
#include "core/models/transformer.h"
#include "core/profile.h"
#include "core/random.h"
#include "launch/plan/cpu_model.h"
#include "launch/plan/model_math.h"
#include "optim/adamw.h"

namespace braid::plan {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The measurements, timed in interleaved rounds. A shared or virtual machine's speed drifts
// over seconds (on the 2-core KVM guest of docs/benchmarks.md a 512^3 GEMM averaged 86 to 163
// GFLOP/s over 5-second windows, tools/bench_drift.cpp), so timing each kernel in one burst
// gives each rate a different machine state. Each round instead runs every probe for its
// share of the time, so all rates average over the same stretch of time; a rate is total work
// over total time (the mean, which is what a training step sums), after one untimed warm-up
// call per probe.
class Probes {
 public:
  // `fn` does `work` units (FLOPs, bytes, elements) per call; returns the probe's index.
  size_t add(std::function<void()> fn, double work) {
    Probe p;
    p.fn = std::move(fn);
    p.work = work;
    probes_.push_back(std::move(p));
    return probes_.size() - 1;
  }
  // Runs `rounds` rounds; in each, every probe for at least seconds_per_probe / rounds (and
  // at least one call).
  void run(int rounds, double seconds_per_probe) {
    for (Probe& p : probes_) p.fn();
    const double share = seconds_per_probe / std::max(1, rounds);
    for (int r = 0; r < rounds; ++r) {
      for (Probe& p : probes_) {
        const KernelTimes k0 = kernel_times();
        const auto t0 = Clock::now();
        double dt = 0;
        do {
          p.fn();
          ++p.calls;
          dt = seconds_since(t0);
        } while (dt < share);
        p.seconds += dt;
        p.groups += kernel_times() - k0;
      }
    }
  }
  // Work units per second.
  double rate(size_t i) const {
    const Probe& p = probes_.at(i);
    BRAID_CHECK(p.calls > 0 && p.seconds > 0, "calibration probe {} did not run", i);
    return p.work * static_cast<double>(p.calls) / p.seconds;
  }
  double seconds_per_call(size_t i) const { return probes_.at(i).seconds / static_cast<double>(probes_.at(i).calls); }
  // Work units per second of the time the kernel profiler charged to `g` (core/profile.h)
  // while the probe ran: the rate of one kernel group inside a composite probe.
  double group_rate(size_t i, KernelGroup g) const {
    const Probe& p = probes_.at(i);
    const double s = p.groups.seconds[static_cast<int>(g)];
    BRAID_CHECK(p.calls > 0 && s > 0, "calibration probe {} spent no time in {}", i, kernel_group_name(g));
    return p.work * static_cast<double>(p.calls) / s;
  }

 private:
  struct Probe {
    std::function<void()> fn;
    double work = 0;
    double seconds = 0;
    int64_t calls = 0;
    KernelTimes groups;
  };
  std::vector<Probe> probes_;
};

Tensor randn(const Shape& shape, uint64_t stream) {
  Tensor t = Tensor::empty(shape);
  fill_normal(t, 1.0f, 7, stream);
  return t;
}

// Buffers for the linear-layer GEMM probes, sized for the widest shape and shared by all of
// them (probes run one at a time).
struct GemmBuffers {
  std::vector<float> x, w, y, dx, dw;
  GemmBuffers(int64_t tokens, int64_t wide)
      : x(tokens * wide, 0.5f), w(wide * wide, 0.25f), y(tokens * wide), dx(tokens * wide),
        dw(wide * wide) {}
};

// The linear layers of a block at width C, each as the trainer runs it: forward x W^T, input
// gradient dy W, weight gradient dy^T x accumulated. GPT-2: C->3C, C->C, C->4C, 4C->C. Llama
// (4 query heads per KV head, SwiGLU width F): q and o C->C, k and v C->C/4, gate and up C->F,
// down F->C. Work: 6 * tokens * in * out FLOPs.
std::vector<std::array<int64_t, 2>> block_linear_shapes(int64_t C, bool llama) {
  ModelConfig m;
  m.family = "llama";
  m.n_embd = static_cast<int>(C);
  const int64_t F = llama ? m.ffn() : 4 * C, kv = C / 4;
  if (llama) return {{C, C}, {C, kv}, {C, kv}, {C, C}, {C, F}, {C, F}, {F, C}};
  return {{C, 3 * C}, {C, C}, {C, F}, {F, C}};
}

int64_t widest(const std::vector<std::array<int64_t, 2>>& shapes) {
  int64_t w = 0;
  for (const auto& s : shapes) w = std::max({w, s[0], s[1]});
  return w;
}

size_t add_gemm_probe(Probes& probes, std::shared_ptr<GemmBuffers> buf, int64_t N, int64_t C, bool llama) {
  const auto shapes = block_linear_shapes(C, llama);
  double flops = 0;
  for (const auto& s : shapes) flops += 6.0 * N * s[0] * s[1];
  return probes.add(
      [buf, shapes, N] {
        for (const auto& s : shapes) {
          const int64_t in = s[0], out = s[1];
          gemm_f32(false, true, N, out, in, 1.0f, buf->x.data(), in, buf->w.data(), in, 0.0f, buf->y.data(), out);
          gemm_f32(false, false, N, in, out, 1.0f, buf->y.data(), out, buf->w.data(), in, 0.0f, buf->dx.data(), in);
          gemm_f32(true, false, out, in, N, 1.0f, buf->y.data(), out, buf->x.data(), in, 1.0f, buf->dw.data(), in);
        }
      },
      flops);
}

// One real transformer block of `family` at width C (head_dim 64, 32 at C < 256; Llama with 4
// query heads per KV head), forward + backward on `tokens` tokens of 256: the kernels and
// shapes braid train runs. The probe's work is counted twice, read per kernel group: GEMM
// FLOPs (6 per matmul parameter per token) against the profiler's GEMM time, and the bytes
// block_elementwise_bytes_per_token counts against its element-wise time.
struct BlockProbe {
  size_t index = 0;
  double gemm_flops = 0, elementwise_bytes = 0;
};

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
    std::unique_ptr<Transformer> model;
    Tensor x, dy;
  };
  auto st = std::make_shared<State>();
  st->model = std::make_unique<Transformer>(m);
  st->model->init_weights();
  st->x = randn({B, T, C}, 13);
  st->dy = randn({B, T, C}, 14);
  BlockProbe bp;
  const double n = static_cast<double>(B * T);
  bp.gemm_flops = 6.0 * static_cast<double>(block_matmul_params(m)) * n;
  bp.elementwise_bytes = block_elementwise_bytes_per_token(m) * n;
  bp.index = probes.add(
      [st] {
        Saved saved;
        st->model->blocks_forward(st->x, saved);
        st->model->blocks_backward(st->dy, saved);
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
    auto p = std::make_unique<Parameter>(fmt::format("calibrate.{}.weight", i), Shape{rows, cols});
    fill_normal(p->value, 0.02f, 15, static_cast<uint64_t>(i));
    fill_normal(p->grad, 1.0f, 16, static_cast<uint64_t>(i));
    st->ps.push_back(p.get());
    st->owned.push_back(std::move(p));
  }
  st->opt = std::make_unique<AdamW>(st->ps, OptimConfig{});
  const double n = static_cast<double>(kTensors * rows * cols);
  return probes.add(
      [st] {
        const double norm = global_grad_norm(st->ps);
        clip_grad_norm(st->ps, norm, static_cast<float>(norm * 0.99999));
        st->opt->step(1e-4f);
      },
      10.0 * 4.0 * n);
}

// Causal attention forward + backward on `tokens` tokens of sequences of length T at n_embd
// C, in the kernel's own FLOPs; `group` query heads share each KV head.
size_t add_attention_probe(Probes& probes, int64_t tokens, int64_t T, int64_t D, int64_t group, int64_t C) {
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
      [b] {
        attention_forward(b->out, b->lse, b->q, b->k, b->v);
        attention_backward(b->dq, b->dk, b->dv, b->dout, b->q, b->k, b->v, b->out, b->lse);
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
  return probes.add([b, scale] { lm_head_cross_entropy(b->losses, b->dx, b->dw, b->x, b->w, b->targets, scale); },
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
      [t] {
        layernorm_forward(t->y, t->mean, t->rstd, t->x, t->g, t->b, 1e-5f);
        layernorm_backward(t->dx, t->dg, t->db, t->dy, t->x, t->g, t->mean, t->rstd);
        add_inplace(t->y, t->dx);
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
      [t, swiglu] {
        if (swiglu) {
          swiglu_forward(t->y, t->a, t->u);
          swiglu_backward(t->da, t->du, t->dy, t->a, t->u);
        } else {
          gelu_forward(t->y, t->a);
          gelu_backward(t->da, t->dy, t->a);
        }
      },
      static_cast<double>(N) * F);
}

// 100 calls of add_inplace on 16384 floats (one OpenMP region each): seconds per call, from
// which the byte time is subtracted afterwards to leave the fixed cost.
constexpr int64_t kCallProbeFloats = 16384;
size_t add_call_probe(Probes& probes) {
  auto a = std::make_shared<Tensor>(Tensor::zeros({kCallProbeFloats}));
  auto b = std::make_shared<Tensor>(Tensor::zeros({kCallProbeFloats}));
  return probes.add(
      [a, b] {
        for (int k = 0; k < 100; ++k) add_inplace(*a, *b);
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

}  // namespace

GpuSpec calibrate_machine(const CalibrateOptions& opt) {
  Probes probes;
  const int64_t n = opt.gemm_size;
  auto sq = std::make_shared<std::vector<float>>(3 * n * n, 0.25f);  // A, B, C of (n, n)
  auto sqb = std::make_shared<std::vector<bf16>>(2 * n * n, float_to_bf16(0.25f));
  const double sq_flops = 2.0 * n * n * n;
  const size_t p_f32 = probes.add(
      [sq, n] {
        float* p = sq->data();
        gemm_f32(false, false, n, n, n, 1.0f, p, n, p + n * n, n, 0.0f, p + 2 * n * n, n);
      },
      sq_flops);
  const size_t p_bf16 = probes.add(
      [sq, sqb, n] {
        const bf16* p = sqb->data();
        gemm_bf16(false, false, n, n, n, 1.0f, p, n, p + n * n, n, 0.0f, sq->data() + 2 * n * n, n);
      },
      sq_flops);
  const size_t p_copy = add_copy_probe(probes, opt.copy_bytes);

  const int64_t N = opt.tokens;
  int64_t most_tokens = N;
  for (int t : opt.gemm_token_counts) most_tokens = std::max<int64_t>(most_tokens, t);
  const int64_t wide = widest(block_linear_shapes(opt.gemm_tokens_width, false));
  auto gbuf = std::make_shared<GemmBuffers>(most_tokens, wide);
  std::vector<size_t> p_gemm_tokens, p_attn, p_attn_gqa, p_attn_seq, p_lm, p_lm_vocab;
  std::vector<BlockProbe> p_block, p_block_llama;
  for (int w : opt.gemm_widths) {
    p_block.push_back(add_block_probe(probes, N, w, false));
    p_block_llama.push_back(add_block_probe(probes, N, w, true));
  }
  for (int t : opt.gemm_token_counts) p_gemm_tokens.push_back(add_gemm_probe(probes, gbuf, t, opt.gemm_tokens_width, false));
  for (int d : opt.head_dims) {
    p_attn.push_back(add_attention_probe(probes, N, opt.attention_seq, d, 1, opt.attention_width));
    p_attn_gqa.push_back(add_attention_probe(probes, N, opt.attention_seq, d, 4, opt.attention_width));
  }
  for (int s : opt.attention_seqs)
    p_attn_seq.push_back(add_attention_probe(probes, N, s, opt.attention_sides_head_dim, 1, opt.attention_width));
  std::vector<size_t> p_attn_width;
  for (int w : opt.attention_widths)
    p_attn_width.push_back(add_attention_probe(probes, N, opt.attention_seq, opt.attention_sides_head_dim, 1, w));
  for (int w : opt.lm_head_widths) p_lm.push_back(add_lm_head_probe(probes, N, w, opt.lm_head_ref_vocab));
  for (int v : opt.lm_head_vocabs) p_lm_vocab.push_back(add_lm_head_probe(probes, N, opt.lm_head_vocabs_width, v));
  const size_t p_elem = add_elementwise_probe(probes, N);
  const size_t p_gelu = add_activation_probe(probes, N, false);
  const size_t p_swiglu = add_activation_probe(probes, N, true);
  const size_t p_call = add_call_probe(probes);
  std::vector<size_t> p_opt;
  for (int64_t n : opt.optimizer_params) p_opt.push_back(add_optimizer_probe(probes, n));

  probes.run(opt.rounds, opt.seconds_per_probe);

  GpuSpec g;
  g.name = "cpu-calibrated";
  g.description = "this machine, measured by braid plan --calibrate (" + gemm_backend_name() + ")";
  const double pages = static_cast<double>(sysconf(_SC_PHYS_PAGES));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  g.memory_gib = pages * page / (1024.0 * 1024.0 * 1024.0);
  g.tflops_fp32 = probes.rate(p_f32) / 1e12;
  g.tflops_bf16 = probes.rate(p_bf16) / 1e12;
  g.tflops_fp16 = 0;
  const double bw_gbs = probes.rate(p_copy) / 1e9;
  g.mem_bw_gbs = bw_gbs;
  g.intra_bw_gbs = bw_gbs / 2;  // one copy moves data in one direction
  g.inter_bw_gbs = bw_gbs / 2;
  g.matmul_efficiency = 1.0;
  g.overhead_gib = 0.25;
  g.gpus_per_node = 1;
  auto table = [&](const std::vector<int>& keys, const std::vector<size_t>& idx) {
    std::vector<RatePoint> t;
    for (size_t i = 0; i < keys.size(); ++i) t.push_back({double(keys[i]), probes.rate(idx[i]) / 1e12});
    return t;
  };
  auto block_table = [&](const std::vector<BlockProbe>& ps, bool gemm) {
    std::vector<RatePoint> t;
    for (size_t i = 0; i < ps.size(); ++i) {
      const BlockProbe& b = ps[i];
      const double r = gemm ? b.gemm_flops * probes.group_rate(b.index, KernelGroup::Gemm) / 1e12
                            : b.elementwise_bytes * probes.group_rate(b.index, KernelGroup::Elementwise) / 1e9;
      t.push_back({double(opt.gemm_widths[i]), r});
    }
    return t;
  };
  g.gemm_by_width = block_table(p_block, true);
  g.gemm_llama_by_width = block_table(p_block_llama, true);
  g.block_elementwise_by_width = block_table(p_block, false);
  g.block_elementwise_llama_by_width = block_table(p_block_llama, false);
  g.gemm_by_tokens = table(opt.gemm_token_counts, p_gemm_tokens);
  g.gemm_ref_tokens = static_cast<double>(N);
  g.attention_by_head_dim = table(opt.head_dims, p_attn);
  g.attention_gqa_by_head_dim = table(opt.head_dims, p_attn_gqa);
  g.attention_by_seq = table(opt.attention_seqs, p_attn_seq);
  g.attention_ref_seq = opt.attention_seq;
  g.attention_by_width = table(opt.attention_widths, p_attn_width);
  g.attention_ref_width = opt.attention_width;
  g.lm_head_by_width = table(opt.lm_head_widths, p_lm);
  g.lm_head_by_vocab = table(opt.lm_head_vocabs, p_lm_vocab);
  g.lm_head_ref_vocab = opt.lm_head_ref_vocab;
  for (size_t i = 0; i < p_opt.size(); ++i)
    g.optimizer_by_params.push_back({double(opt.optimizer_params[i]), probes.rate(p_opt[i]) / 1e9});
  g.elementwise_gbs = probes.rate(p_elem) / 1e9;
  g.gelu_gelems = probes.rate(p_gelu) / 1e9;
  g.swiglu_gelems = probes.rate(p_swiglu) / 1e9;
  // One call's fixed cost: its time less the bytes it moves (r a, r b, w a) at the element-wise rate.
  const double call_s = probes.seconds_per_call(p_call) / 100.0;
  g.kernel_call_us = std::max(0.0, call_s - 12.0 * kCallProbeFloats / (g.elementwise_gbs * 1e9)) * 1e6;
  g.source = fmt::format(
      "measured: gemm {}^3, memcpy {} MiB; kernels at {} tokens; {} interleaved rounds, {:.2f} s per probe",
      n, opt.copy_bytes >> 20, N, opt.rounds, opt.seconds_per_probe);
  return g;
}

}  // namespace braid::plan
