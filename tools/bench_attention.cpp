// Benchmark: CPU attention (forward + backward) and the fused LM-head cross-entropy at the
// gpt2 benchmark shapes, as GFLOP/s and as a fraction of a gemm_f32 rate measured in the same
// run. Usage: bench_attention [repeats] [--cold]
//
// --cold reads a 128 MiB buffer before every timed call, so the call finds its operands in far
// caches or memory as it does in training (where each layer's attention runs after GEMMs and the
// other layers have passed through the caches), not in the core's own caches.
//
// Two rates per kernel: wall clock (best of the repeats) and process CPU time (summed over
// threads). On a shared machine the wall-clock rate swings with other jobs; the CPU-time rate
// only counts time this process was running, so its ratio to the GEMM is the steadier one.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/kernels/attention.h"
#include "core/kernels/cross_entropy.h"
#include "core/kernels/gemm.h"
#include "core/tensor.h"
#include "launch/train/exec_setup.h"

namespace {

using braid::Tensor;

Tensor random_tensor(const braid::Shape& shape, uint32_t seed, float amp) {
  Tensor t = Tensor::empty(shape);
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-amp, amp);
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = dist(gen);
  return t;
}

double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

struct Timing {
  double wall_s;  // best (smallest) wall time of one call: the least disturbed run
  double cpu_s;   // mean process CPU time of one call, all threads together
};

bool g_cold = false;

// Reads a buffer larger than the caches a call's operands would otherwise stay in.
void evict_caches() {
  static std::vector<char> junk(size_t{128} << 20, 1);
  volatile char sink = 0;
  char acc = 0;
  for (size_t i = 0; i < junk.size(); i += 64) acc = static_cast<char>(acc + junk[i]);
  sink = acc;
  (void)sink;
}

// One warm-up call, then `repeats` timed calls (each after evict_caches() with --cold).
Timing time_calls(const std::function<void()>& fn, int repeats) {
  fn();
  double best = 1e30, cpu = 0.0;
  for (int r = 0; r < repeats; ++r) {
    if (g_cold) evict_caches();
    const double cpu0 = cpu_seconds();
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    best = std::min(best,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    cpu += cpu_seconds() - cpu0;
  }
  return {best, cpu / repeats};
}

void print_row(const char* name, double flops, Timing t, Timing gemm, double gemm_flops) {
  const double gflops = flops / t.wall_s / 1e9, gemm_gflops = gemm_flops / gemm.wall_s / 1e9;
  const double cpu_ratio = (flops / t.cpu_s) / (gemm_flops / gemm.cpu_s);
  std::printf("%-34s %9.2f %8.2f %9.1f %8.2f %8.2f\n", name, t.wall_s * 1e3, flops / 1e9, gflops,
              gflops / gemm_gflops, cpu_ratio);
}

}  // namespace

int main(int argc, char** argv) {
  int repeats = 10;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--cold")
      g_cold = true;
    else
      repeats = std::max(1, std::atoi(argv[i]));
  }
  const std::unique_ptr<braid::ExecContext> ctx_owner = braid::make_cpu_context();
  braid::ExecContext& ctx = *ctx_owner;
  std::printf("gemm backend %s, %d OpenMP threads, best of %d runs%s\n",
              braid::gemm_backend_name(ctx.gemm()).c_str(), omp_get_max_threads(), repeats,
              g_cold ? ", caches evicted before each (--cold)" : "");

  // Reference GEMM: (2048 x 512) @ (512 x 1536), the size of a gpt2 MLP matmul at B*T = 2048.
  const int64_t M = 2048, N = 1536, K = 512;
  Tensor a = random_tensor({M, K}, 1, 1.0f), b = random_tensor({K, N}, 2, 1.0f);
  Tensor c = Tensor::empty({M, N});
  const double gemm_flops = 2.0 * M * N * K;
  const Timing gemm_t = time_calls(
      [&] {
        braid::gemm_f32(ctx, false, false, M, N, K, 1.0f, a.f32(), K, b.f32(), N, 0.0f, c.f32(), N);
      },
      repeats);

  // Attention at gpt2 benchmark shapes. FLOPs count only the causal half (the query-key pairs
  // that are not masked): forward = 2 GEMMs (QK^T, PV) = 4*D per pair; backward = 4 GEMMs
  // (dV, dP, dQ, dK) = 8*D per pair plus the QK^T recompute = 2*D per pair.
  const int64_t B = 8, T = 256, H = 8, D = 64;
  Tensor q = random_tensor({B, T, H, D}, 3, 1.0f), k = random_tensor({B, T, H, D}, 4, 1.0f);
  Tensor v = random_tensor({B, T, H, D}, 5, 1.0f), dout = random_tensor({B, T, H, D}, 6, 1.0f);
  Tensor out = Tensor::empty({B, T, H, D}), lse = Tensor::empty({B, H, T});
  Tensor dq = Tensor::empty({B, T, H, D}), dk = Tensor::empty({B, T, H, D});
  Tensor dv = Tensor::empty({B, T, H, D});
  const double pairs = static_cast<double>(B * H) * (T * (T + 1) / 2);
  const Timing attn_fwd_s =
      time_calls([&] { braid::attention_forward(ctx, out, lse, q, k, v); }, repeats);
  const Timing attn_bwd_s = time_calls(
      [&] { braid::attention_backward(ctx, dq, dk, dv, dout, q, k, v, out, lse); }, repeats);

  // The same attention with bf16 q, k, v, out and gradients (lse stays f32).
  const braid::DType lo = braid::DType::BF16;
  Tensor q16 = q.to(lo), k16 = k.to(lo), v16 = v.to(lo), dout16 = dout.to(lo);
  Tensor out16 = Tensor::empty({B, T, H, D}, lo), dq16 = Tensor::empty({B, T, H, D}, lo);
  Tensor dk16 = Tensor::empty({B, T, H, D}, lo), dv16 = Tensor::empty({B, T, H, D}, lo);
  const Timing attn16_fwd_s =
      time_calls([&] { braid::attention_forward(ctx, out16, lse, q16, k16, v16); }, repeats);
  const Timing attn16_bwd_s = time_calls(
      [&] { braid::attention_backward(ctx, dq16, dk16, dv16, dout16, q16, k16, v16, out16, lse); },
      repeats);

  // GPT-2's fused projection read in place (attention_forward_packed): qkv (B, T, 3 * H * D).
  Tensor qkv = random_tensor({B, T, 3 * H * D}, 9, 1.0f), dqkv = Tensor::empty({B, T, 3 * H * D});
  const Timing packed_fwd_s =
      time_calls([&] { braid::attention_forward_packed(ctx, out, lse, qkv, H); }, repeats);
  const Timing packed_bwd_s = time_calls(
      [&] { braid::attention_backward_packed(ctx, dqkv, dout, qkv, out, lse, H); }, repeats);
  Tensor qkv16 = qkv.to(lo), dqkv16 = Tensor::empty({B, T, 3 * H * D}, lo);
  const Timing packed16_fwd_s =
      time_calls([&] { braid::attention_forward_packed(ctx, out16, lse, qkv16, H); }, repeats);
  const Timing packed16_bwd_s = time_calls(
      [&] { braid::attention_backward_packed(ctx, dqkv16, dout16, qkv16, out16, lse, H); },
      repeats);

  // LM head: x (B*T, 512), w (8192, 512); forward + backward are 3 GEMMs of 2*N*V*C each.
  const int64_t rows = B * T, C = 512, V = 8192;
  Tensor x = random_tensor({rows, C}, 7, 1.0f), w = random_tensor({V, C}, 8, 0.05f);
  std::vector<int32_t> tgt(static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i) tgt[i] = static_cast<int32_t>((i * 7919) % V);
  Tensor targets = Tensor::from_vector_i32(tgt, {rows});
  Tensor losses = Tensor::empty({rows}), dx = Tensor::empty({rows, C});
  Tensor dw = Tensor::zeros({V, C}), no_grad;
  const double ce_gemm_flops = 2.0 * rows * V * C;
  const Timing ce_fwd_s = time_calls(
      [&] { braid::lm_head_cross_entropy(ctx, losses, no_grad, no_grad, x, w, targets, 1.0f); },
      repeats);
  const Timing ce_s = time_calls(
      [&] { braid::lm_head_cross_entropy(ctx, losses, dx, dw, x, w, targets, 1.0f / rows); },
      repeats);

  const Timing attn_t{attn_fwd_s.wall_s + attn_bwd_s.wall_s, attn_fwd_s.cpu_s + attn_bwd_s.cpu_s};
  std::printf("%-34s %9s %8s %9s %8s %8s\n", "kernel", "wall ms", "GFLOP", "GFLOP/s", "vs gemm",
              "cpu-time");
  print_row("gemm_f32 2048x1536x512", gemm_flops, gemm_t, gemm_t, gemm_flops);
  print_row("attention fwd (causal half)", 4.0 * D * pairs, attn_fwd_s, gemm_t, gemm_flops);
  print_row("attention bwd (causal half)", 10.0 * D * pairs, attn_bwd_s, gemm_t, gemm_flops);
  print_row("attention fwd+bwd (causal half)", 14.0 * D * pairs, attn_t, gemm_t, gemm_flops);
  print_row("attention fwd bf16", 4.0 * D * pairs, attn16_fwd_s, gemm_t, gemm_flops);
  print_row("attention bwd bf16", 10.0 * D * pairs, attn16_bwd_s, gemm_t, gemm_flops);
  print_row("attention fwd, packed qkv", 4.0 * D * pairs, packed_fwd_s, gemm_t, gemm_flops);
  print_row("attention bwd, packed qkv", 10.0 * D * pairs, packed_bwd_s, gemm_t, gemm_flops);
  print_row("attention fwd bf16, packed qkv", 4.0 * D * pairs, packed16_fwd_s, gemm_t, gemm_flops);
  print_row("attention bwd bf16, packed qkv", 10.0 * D * pairs, packed16_bwd_s, gemm_t, gemm_flops);
  print_row("lm_head CE forward only", ce_gemm_flops, ce_fwd_s, gemm_t, gemm_flops);
  print_row("lm_head CE fwd+bwd", 3.0 * ce_gemm_flops, ce_s, gemm_t, gemm_flops);
  // The bf16 LM head (bf16 x and w, f32 dw as with master weights): staged in f32 (what
  // gemm_bf16's widening plan runs) against bf16 GEMMs (the native plan), alternated call by
  // call so that load drift hits both; medians of `repeats` calls each.
  if (ctx.gemm().bf16_mode == braid::Bf16Mode::Native) {
    braid::ExecOptions o;
    o.cpu_isa = ctx.cpu_isa();
    o.gemm = braid::GemmPlan{ctx.gemm().backend, braid::Bf16Mode::Widen};
    braid::ExecContext staged(o);
    Tensor x16 = x.to(braid::DType::BF16), w16 = w.to(braid::DType::BF16);
    Tensor dx16 = Tensor::empty({rows, C}, braid::DType::BF16);
    std::vector<double> t_staged, t_native, ratio;  // ratio: staged / native, per pair
    auto once = [&](braid::ExecContext& c) {
      const auto t0 = std::chrono::steady_clock::now();
      braid::lm_head_cross_entropy(c, losses, dx16, dw, x16, w16, targets, 1.0f / rows);
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    once(staged);
    once(ctx);
    for (int r = 0; r < repeats; ++r) {
      t_staged.push_back(once(staged));
      t_native.push_back(once(ctx));
      ratio.push_back(t_staged.back() / t_native.back());
    }
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    const double staged_s = median(t_staged), native_s = median(t_native);
    std::printf("%-34s %9.2f %8.2f %9.1f\n", "lm_head CE fwd+bwd bf16, staged f32", staged_s * 1e3,
                3.0 * ce_gemm_flops / 1e9, 3.0 * ce_gemm_flops / staged_s / 1e9);
    std::printf("%-34s %9.2f %8.2f %9.1f   (staged / this: %.2fx, median of %d pairs)\n",
                "lm_head CE fwd+bwd bf16, bf16 GEMMs", native_s * 1e3, 3.0 * ce_gemm_flops / 1e9,
                3.0 * ce_gemm_flops / native_s / 1e9, median(ratio), repeats);
  } else {
    std::printf("bf16 LM head: %s, so it runs staged in f32 (no second path to compare)\n",
                braid::gemm_bf16_description(ctx).c_str());
  }
  std::printf("shapes: attention B=%lld T=%lld H=%lld D=%lld; lm head N=%lld C=%lld V=%lld\n",
              static_cast<long long>(B), static_cast<long long>(T), static_cast<long long>(H),
              static_cast<long long>(D), static_cast<long long>(rows), static_cast<long long>(C),
              static_cast<long long>(V));
  return 0;
}
