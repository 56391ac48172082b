// Machine measurements for the device profile (the planner's only kernel calls).
#include "launch/plan/calibrate.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "core/kernels/activation.h"
#include "core/kernels/attention.h"
#include "core/kernels/cross_entropy.h"
#include "core/kernels/elementwise.h"
#include "core/kernels/gemm.h"
#include "core/kernels/layernorm.h"
#include "core/random.h"
#include "launch/plan/cpu_model.h"

namespace braid::plan {

namespace {

using Clock = std::chrono::steady_clock;

// Repeats fn until min_s has passed and at least 5 calls were timed (after one warm-up call);
// returns the median seconds per call, so that a burst of other work on a shared machine does
// not skew the rate.
template <class Fn>
double time_per_call(Fn&& fn, double min_s) {
  fn();
  std::vector<double> times;
  const auto start = Clock::now();
  do {
    const auto t0 = Clock::now();
    fn();
    times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  } while (times.size() < 5 || std::chrono::duration<double>(Clock::now() - start).count() < min_s);
  std::sort(times.begin(), times.end());
  const size_t n = times.size();
  return n % 2 ? times[n / 2] : 0.5 * (times[n / 2 - 1] + times[n / 2]);
}

Tensor randn(const Shape& shape, uint64_t stream) {
  Tensor t = Tensor::empty(shape);
  fill_normal(t, 1.0f, 7, stream);
  return t;
}

// The linear layers of a block at width C, each as the trainer runs it: forward x W^T, input
// gradient dy W, weight gradient dy^T x accumulated. GPT-2: C->3C, C->C, C->4C, 4C->C. Llama
// (4 query heads per KV head, SwiGLU width F): q and o C->C, k and v C->C/4, gate and up C->F,
// down F->C.
double gemm_train_tflops(int64_t N, int64_t C, bool llama, double min_s) {
  ModelConfig m;
  m.family = "llama";
  m.n_embd = static_cast<int>(C);
  const int64_t F = llama ? m.ffn() : 4 * C, kv = C / 4;
  std::vector<std::array<int64_t, 2>> shapes;  // {in, out}
  if (llama) shapes = {{C, C}, {C, kv}, {C, kv}, {C, C}, {C, F}, {C, F}, {F, C}};
  else shapes = {{C, 3 * C}, {C, C}, {C, F}, {F, C}};
  const int64_t wide = std::max(F, 3 * C);
  std::vector<float> x(N * wide, 0.5f), w(wide * wide, 0.25f), y(N * wide), dx(N * wide);
  std::vector<float> dw(wide * wide);
  double flops = 0;
  for (const auto& s : shapes) flops += 6.0 * N * s[0] * s[1];
  const double sec = time_per_call(
      [&] {
        for (const auto& s : shapes) {
          const int64_t in = s[0], out = s[1];
          gemm_f32(false, true, N, out, in, 1.0f, x.data(), in, w.data(), in, 0.0f, y.data(), out);
          gemm_f32(false, false, N, in, out, 1.0f, y.data(), out, w.data(), in, 0.0f, dx.data(), in);
          gemm_f32(true, false, out, in, N, 1.0f, y.data(), out, x.data(), in, 1.0f, dw.data(), in);
        }
      },
      min_s);
  return flops / sec / 1e12;
}

// Causal attention forward + backward at B x T tokens, n_embd 512, in the kernel's own FLOPs.
// `group` query heads share each KV head.
double attention_tflops(int64_t N, int64_t D, int64_t group, double min_s) {
  const int64_t T = 256, B = std::max<int64_t>(1, N / T), C = 512, H = C / D;
  const int64_t Hkv = std::max<int64_t>(1, H / group);
  Tensor q = randn({B, T, H, D}, 1), k = randn({B, T, Hkv, D}, 2), v = randn({B, T, Hkv, D}, 3);
  Tensor out = Tensor::empty({B, T, H, D}), lse = Tensor::empty({B, H, T});
  Tensor dout = randn({B, T, H, D}, 4);
  Tensor dq = Tensor::empty(q.shape()), dk = Tensor::empty(k.shape()), dv = Tensor::empty(v.shape());
  ModelConfig m;
  m.n_embd = static_cast<int>(C);
  m.n_head = static_cast<int>(H);
  const double flops = attention_kernel_flops_per_token(m, T) * B * T;
  const double sec = time_per_call(
      [&] {
        attention_forward(out, lse, q, k, v);
        attention_backward(dq, dk, dv, dout, q, k, v, out, lse);
      },
      min_s);
  return flops / sec / 1e12;
}

// The fused LM head + cross-entropy, forward and backward, vocabulary 4096.
double lm_head_tflops(int64_t N, int64_t C, double min_s) {
  const int64_t V = 4096;
  N = std::min<int64_t>(N, 1024);
  Tensor x = randn({N, C}, 5), w = randn({V, C}, 6);
  std::vector<int32_t> tv(N);
  for (int64_t i = 0; i < N; ++i) tv[i] = static_cast<int32_t>((i * 131) % V);
  Tensor targets = Tensor::from_vector_i32(tv, {N});
  Tensor losses = Tensor::empty({N}), dx = Tensor::empty({N, C}), dw = Tensor::zeros({V, C});
  const double sec = time_per_call(
      [&] { lm_head_cross_entropy(losses, dx, dw, x, w, targets, 1.0f / static_cast<float>(N)); },
      min_s);
  return 6.0 * N * V * C / sec / 1e12;
}

// LayerNorm forward + backward and a residual add on N tokens at width 512: bytes read +
// written per second.
double elementwise_gbs(int64_t N, double min_s) {
  const int64_t C = 512;
  Tensor x = randn({N, C}, 8), y = Tensor::empty({N, C}), dy = randn({N, C}, 9);
  Tensor dx = Tensor::empty({N, C}), mean = Tensor::empty({N}), rstd = Tensor::empty({N});
  Tensor g = Tensor::empty({C}), b = Tensor::zeros({C}), dg = Tensor::zeros({C}), db = Tensor::zeros({C});
  g.fill_(1.0f);
  // Elements moved per token: LN forward 2C, LN backward 3C, add 3C.
  const double bytes = 4.0 * N * 8.0 * C;
  const double sec = time_per_call(
      [&] {
        layernorm_forward(y, mean, rstd, x, g, b, 1e-5f);
        layernorm_backward(dx, dg, db, dy, x, g, mean, rstd);
        add_inplace(y, dx);
      },
      min_s);
  return bytes / sec / 1e9;
}

// GELU (gpt2) or SwiGLU (llama) forward + backward on N tokens x MLP width 2048: 1e9 elements
// per second.
double activation_gelems(int64_t N, bool swiglu, double min_s) {
  const int64_t F = 2048;
  Tensor a = randn({N, F}, 10), u = randn({N, F}, 11), dy = randn({N, F}, 12);
  Tensor y = Tensor::empty({N, F}), da = Tensor::empty({N, F}), du = Tensor::empty({N, F});
  const double sec = time_per_call(
      [&] {
        if (swiglu) {
          swiglu_forward(y, a, u);
          swiglu_backward(da, du, dy, a, u);
        } else {
          gelu_forward(y, a);
          gelu_backward(da, dy, a);
        }
      },
      min_s);
  return static_cast<double>(N) * F / sec / 1e9;
}

// Fixed cost of one parallel kernel call: add_inplace on 16384 floats (one OpenMP region), less
// the time its bytes take at the element-wise bandwidth. Grows sharply when the cores are shared.
double kernel_call_us(double elementwise_gbs, double min_s) {
  const int64_t n = 16384;
  Tensor a = Tensor::zeros({n}), b = Tensor::zeros({n});
  const double sec = time_per_call(
                         [&] {
                           for (int k = 0; k < 100; ++k) add_inplace(a, b);
                         },
                         min_s) /
                     100;
  return std::max(0.0, sec - 12.0 * n / (elementwise_gbs * 1e9)) * 1e6;
}

// Stream-like copy over the OpenMP threads: bytes read plus bytes written per second.
double copy_gbs(size_t bytes, double min_s) {
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  const int64_t chunks = 64;
  const size_t chunk = bytes / chunks;
  const double sec = time_per_call(
      [&] {
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < chunks; ++i) std::memcpy(dst.data() + i * chunk, src.data() + i * chunk, chunk);
      },
      min_s);
  return 2.0 * static_cast<double>(chunk * chunks) / sec / 1e9;
}

}  // namespace

GpuSpec calibrate_machine(const CalibrateOptions& opt) {
  const int64_t n = opt.gemm_size;
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n, 0.0f);  // (n, n) each
  const double flops = 2.0 * n * n * n;
  const double f32_s = time_per_call(
      [&] { gemm_f32(false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n); },
      opt.min_seconds);
  std::vector<bf16> ab(n * n, float_to_bf16(0.5f)), bb(n * n, float_to_bf16(0.25f));
  const double bf16_s = time_per_call(
      [&] { gemm_bf16(false, false, n, n, n, 1.0f, ab.data(), n, bb.data(), n, 0.0f, c.data(), n); },
      opt.min_seconds);
  const double bw_gbs = copy_gbs(opt.copy_bytes, opt.min_seconds);

  GpuSpec g;
  g.name = "cpu-calibrated";
  g.description = "this machine, measured by braid plan --calibrate (" + gemm_backend_name() + ")";
  const double pages = static_cast<double>(sysconf(_SC_PHYS_PAGES));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  g.memory_gib = pages * page / (1024.0 * 1024.0 * 1024.0);
  g.tflops_fp32 = flops / f32_s / 1e12;
  g.tflops_bf16 = flops / bf16_s / 1e12;
  g.tflops_fp16 = 0;
  g.mem_bw_gbs = bw_gbs;
  g.intra_bw_gbs = bw_gbs / 2;  // one copy moves data in one direction
  g.inter_bw_gbs = bw_gbs / 2;
  g.matmul_efficiency = 1.0;
  g.overhead_gib = 0.25;
  g.gpus_per_node = 1;

  const int64_t N = opt.tokens;
  for (int w : opt.gemm_widths) {
    g.gemm_by_width.push_back({double(w), gemm_train_tflops(N, w, false, opt.kernel_seconds)});
    g.gemm_llama_by_width.push_back({double(w), gemm_train_tflops(N, w, true, opt.kernel_seconds)});
  }
  for (int d : opt.head_dims) {
    g.attention_by_head_dim.push_back({double(d), attention_tflops(N, d, 1, opt.kernel_seconds)});
    g.attention_gqa_by_head_dim.push_back({double(d), attention_tflops(N, d, 4, opt.kernel_seconds)});
  }
  for (int w : opt.lm_head_widths) g.lm_head_by_width.push_back({double(w), lm_head_tflops(N, w, opt.kernel_seconds)});
  g.elementwise_gbs = elementwise_gbs(N, opt.kernel_seconds);
  g.gelu_gelems = activation_gelems(N, false, opt.kernel_seconds);
  g.swiglu_gelems = activation_gelems(N, true, opt.kernel_seconds);
  g.kernel_call_us = kernel_call_us(g.elementwise_gbs, opt.kernel_seconds);
  g.source = fmt::format("measured: gemm {}^3, memcpy {} MiB; kernels at {} tokens", n,
                         opt.copy_bytes >> 20, N);
  return g;
}

}  // namespace braid::plan
