// bench_gemm: GFLOP/s of each CPU GEMM backend on the benchmark model's training shapes.
// Usage: bench_gemm [--reps N] [--min-gflops X]   (OMP_NUM_THREADS sets the thread count)
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/kernels/cpu/gemm_backends.h"
#include "core/kernels/gemm.h"
#include "core/memory.h"
#include "launch/train/exec_setup.h"
#include "tools/bench_cli.h"

namespace {

using braid::Bf16Mode;
using braid::GemmBackend;
using clock_type = std::chrono::steady_clock;

struct Shape {
  std::string name;
  bool ta, tb;
  int64_t M, N, K;
  bool peak;
};

// Which oneDNN kernel an f32 call takes: the plan's choice (what training runs), or one forced.
enum class F32Kernel { Plan, Sgemm, Matmul };

// One way to run a GEMM: library, dtype and (for bf16) native kernel or widening to f32.
struct Config {
  GemmBackend backend;
  bool bf16;
  Bf16Mode mode;
  F32Kernel f32_kernel = F32Kernel::Plan;
  std::string label() const {
    std::string s(braid::gemm_backend_label(backend));
    if (bf16) s += mode == Bf16Mode::Native ? "(native)" : "(widen)";
    if (f32_kernel == F32Kernel::Sgemm) s += "(sgemm)";
    if (f32_kernel == F32Kernel::Matmul) s += "(matmul)";
    return s;
  }
};

// Training shapes of the benchmark model: tokens 2048, width 512, ffn 2048, vocab 8192.
// Linear y = x W^T with x (T, in), W (out, in); backward dx = dy W and dW = dy^T x.
std::vector<Shape> training_shapes() {
  constexpr int64_t T = 2048;
  struct Layer {
    const char* name;
    int64_t in, out;
  };
  const Layer layers[] = {
      {"qkv", 512, 1536}, {"fc1", 512, 2048}, {"fc2", 2048, 512}, {"lm_head", 512, 8192}};
  std::vector<Shape> shapes;
  for (const Layer& l : layers) {
    shapes.push_back({std::string(l.name) + " fwd", false, true, T, l.out, l.in, false});
    shapes.push_back({std::string(l.name) + " dx", false, false, T, l.in, l.out, false});
    shapes.push_back({std::string(l.name) + " dW", true, false, l.out, l.in, T, false});
  }
  shapes.push_back({"peak", false, false, 2048, 2048, 2048, true});
  return shapes;
}

// 64-byte aligned, as tensors are: oneDNN's bf16 rates depend on it (core/memory.h).
struct Buffers {
  braid::AlignedVector<float> a, b, c;
  braid::AlignedVector<braid::bf16> a16, b16;
};

void fill(Buffers& buf, size_t na, size_t nb, size_t nc) {
  uint32_t s = 12345;
  auto next = [&s] {
    s = s * 1664525u + 1013904223u;
    return static_cast<float>(s >> 8) / 16777216.0f * 2.0f - 1.0f;
  };
  buf.a.resize(na);
  buf.b.resize(nb);
  buf.c.assign(nc, 0.0f);
  for (float& v : buf.a) v = next();
  for (float& v : buf.b) v = next();
  buf.a16.resize(na);
  buf.b16.resize(nb);
  for (size_t i = 0; i < na; ++i) buf.a16[i] = braid::float_to_bf16(buf.a[i]);
  for (size_t i = 0; i < nb; ++i) buf.b16[i] = braid::float_to_bf16(buf.b[i]);
}

void run_once(braid::ExecContext& ctx, const Config& cfg, bool ta, bool tb, int64_t M, int64_t N,
              int64_t K, Buffers& buf) {
  const int64_t lda = ta ? M : K, ldb = tb ? K : N;
  if (cfg.bf16)
    braid::gemm_bf16_with(ctx, cfg.backend, cfg.mode, ta, tb, M, N, K, 1.0f, buf.a16.data(), lda,
                          buf.b16.data(), ldb, 0.0f, buf.c.data(), N);
  else if (cfg.f32_kernel == F32Kernel::Sgemm)
    braid::gemm_f32_onednn(ta, tb, M, N, K, 1.0f, buf.a.data(), lda, buf.b.data(), ldb, 0.0f,
                           buf.c.data(), N);
  else if (cfg.f32_kernel == F32Kernel::Matmul)
    braid::gemm_f32_onednn_matmul(*ctx.gemm_workspace().lease(), ta, tb, M, N, K, 1.0f,
                                  buf.a.data(), lda, buf.b.data(), ldb, 0.0f, buf.c.data(), N);
  else
    braid::gemm_f32_with(ctx, cfg.backend, ta, tb, M, N, K, 1.0f, buf.a.data(), lda, buf.b.data(),
                         ldb, 0.0f, buf.c.data(), N);
}

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

// The middle value of t (the upper one of an even count).
double median(std::vector<double> t) {
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// Median seconds per call after one warm-up; slow configs get fewer repetitions.
double time_gemm(braid::ExecContext& ctx, const Config& cfg, const Shape& s, Buffers& buf,
                 int reps) {
  auto t0 = clock_type::now();
  run_once(ctx, cfg, s.ta, s.tb, s.M, s.N, s.K, buf);
  const double warm = seconds_since(t0);
  if (warm > 2.0) return warm;
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    t0 = clock_type::now();
    run_once(ctx, cfg, s.ta, s.tb, s.M, s.N, s.K, buf);
    t.push_back(seconds_since(t0));
  }
  return median(std::move(t));
}

int process_threads() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("Threads:", 0) == 0) return std::atoi(line.c_str() + 8);
  return -1;
}

// Every OpenMP thread calls the GEMM on its own small block, like the attention kernel does.
double in_region_gflops(braid::ExecContext& ctx, const Config& cfg, int64_t M, int64_t N, int64_t K,
                        int calls) {
  const int nthr = omp_get_max_threads();
  std::vector<Buffers> bufs(static_cast<size_t>(nthr));
  for (Buffers& b : bufs) fill(b, M * K, K * N, M * N);
  auto region = [&](int n) {
#pragma omp parallel num_threads(nthr)
    {
      Buffers& b = bufs[static_cast<size_t>(omp_get_thread_num())];
      for (int i = 0; i < n; ++i) run_once(ctx, cfg, false, false, M, N, K, b);
    }
  };
  region(2);
  const auto t0 = clock_type::now();
  region(calls);
  return 2.0 * M * N * K * calls * nthr / seconds_since(t0) / 1e9;
}

// A memory-bound OpenMP loop right after a big GEMM: shows library threads still spinning.
double omp_loop_ms_after(braid::ExecContext& ctx, const Config& cfg, Buffers& big) {
  std::vector<float> x(1 << 23, 1.0f);
  double best = 1e30;
  for (int r = 0; r < 3; ++r) {
    run_once(ctx, cfg, false, false, 1024, 1024, 1024, big);
    const auto t0 = clock_type::now();
    for (int pass = 0; pass < 4; ++pass) {
#pragma omp parallel for schedule(static)
      for (size_t i = 0; i < x.size(); ++i) x[i] = x[i] * 0.999f + 0.001f;
    }
    best = std::min(best, seconds_since(t0) * 1e3);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 5;
  double min_gflops = 5.0;
  CLI::App app{"bench_gemm: GFLOP/s of each CPU GEMM backend on training shapes", "bench_gemm"};
  app.option_defaults()->always_capture_default();
  app.add_option("--reps", reps, "timed calls per shape and backend (median; at least 1)");
  app.add_option("--min-gflops", min_gflops,
                 "skip the rest of a backend's shapes once it runs slower than this");
  if (const std::optional<int> code = braid::bench::parse_args(app, argc, argv)) return *code;
  reps = std::max(1, reps);
  const std::unique_ptr<braid::ExecContext> ctx_owner = braid::make_cpu_context();
  braid::ExecContext& ctx = *ctx_owner;
  std::printf(
      "# threads %d, instruction set %s, oneDNN native bf16 ISA: %s, default plan: %s "
      "(bf16 %s)\n",
      omp_get_max_threads(), std::string(braid::cpu_isa_name(ctx.cpu_isa())).c_str(),
      braid::onednn_has_native_bf16() ? "yes" : "no", braid::gemm_backend_name(ctx.gemm()).c_str(),
      ctx.gemm().bf16_mode == Bf16Mode::Native ? "native" : "widen");

  // f32 on oneDNN three ways: as training runs it (sgemm, the weight gradients on the matmul
  // primitive where onednn_f32_matmul_preferred says so), and each kernel alone.
  const std::vector<Config> configs = {
      {GemmBackend::OneDnn, false, Bf16Mode::Native},
      {GemmBackend::OneDnn, false, Bf16Mode::Native, F32Kernel::Sgemm},
      {GemmBackend::OneDnn, false, Bf16Mode::Native, F32Kernel::Matmul},
      {GemmBackend::OpenBlas, false, Bf16Mode::Native},
      {GemmBackend::OneDnn, true, Bf16Mode::Native},
      {GemmBackend::OpenBlas, true, Bf16Mode::Native},
      {GemmBackend::OneDnn, true, Bf16Mode::Widen},
      {GemmBackend::OpenBlas, true, Bf16Mode::Widen}};
  const std::vector<Shape> shapes = training_shapes();
  Buffers buf;
  fill(buf, 2048 * 8192, 2048 * 8192, 2048 * 8192);

  // Shapes outer, configs inner: on a shared machine load drifts, and interleaving keeps the
  // comparison between backends fair.
  std::vector<Config> active;
  for (const Config& cfg : configs) {
    if (cfg.bf16 && cfg.mode == Bf16Mode::Native && !braid::native_bf16_available(cfg.backend))
      std::printf("# %s bf16: no native bf16 kernel in this library on this CPU; skipped\n",
                  cfg.label().c_str());
    else
      active.push_back(cfg);
  }
  std::vector<std::vector<double>> gflops(active.size(), std::vector<double>(shapes.size(), -1.0));
  std::vector<double> total(active.size(), 0.0);
  std::vector<bool> complete(active.size(), true);
  for (size_t si = 0; si < shapes.size(); ++si) {
    const Shape& s = shapes[si];
    for (size_t ci = 0; ci < active.size(); ++ci) {
      if (!complete[ci]) continue;
      const double sec = time_gemm(ctx, active[ci], s, buf, reps);
      gflops[ci][si] = 2.0 * s.M * s.N * s.K / sec / 1e9;
      if (!s.peak) total[ci] += sec;
      // Emulated kernels can be orders of magnitude slower; don't spend minutes on them.
      if (gflops[ci][si] < min_gflops) complete[ci] = false;
    }
  }
  std::printf("\n| shape | M x N x K | ta tb | backend | dtype | GFLOP/s |\n");
  std::printf("|---|---|---|---|---|---:|\n");
  std::map<std::string, double> step_s;  // per config: seconds for all training shapes once
  for (size_t ci = 0; ci < active.size(); ++ci) {
    const Config& cfg = active[ci];
    for (size_t si = 0; si < shapes.size(); ++si) {
      const Shape& s = shapes[si];
      if (gflops[ci][si] < 0) continue;
      std::printf("| %s | %ldx%ldx%ld | %c %c | %s | %s | %.1f |\n", s.name.c_str(), (long)s.M,
                  (long)s.N, (long)s.K, s.ta ? 'T' : 'N', s.tb ? 'T' : 'N', cfg.label().c_str(),
                  cfg.bf16 ? "bf16" : "f32", gflops[ci][si]);
    }
    if (complete[ci])
      step_s[std::string(cfg.bf16 ? "bf16 " : "f32 ") + cfg.label()] = total[ci];
    else
      std::printf("| (rest of %s %s skipped: under %.1f GFLOP/s) | | | | | |\n",
                  cfg.label().c_str(), cfg.bf16 ? "bf16" : "f32", min_gflops);
  }

  std::printf("\nTime for all 12 training shapes once (lower is better):\n");
  for (const char* dtype : {"f32 ", "bf16 "}) {
    std::string best;
    for (const auto& [name, sec] : step_s) {
      if (name.rfind(dtype, 0) != 0) continue;
      std::printf("  %-24s %8.1f ms\n", name.c_str(), sec * 1e3);
      if (best.empty() || sec < step_s[best]) best = name;
    }
    if (!best.empty()) std::printf("  best %s: %s\n", dtype, best.c_str());
  }

  // f32 weight gradients (A^T B) across widths N: dnnl_sgemm against the matmul primitive,
  // alternating per shape, and the one gemm_f32 takes (onednn_f32_matmul_preferred). The widths
  // of the benchmark model (512), GPT-2 124M (768) and around; the LM head's dw per row chunk
  // (512 rows at vocabulary 8192, 333 at 50304, here with 16384 rows to fit the buffers).
  std::printf("\nf32 weight-gradient layout (T N) across widths, GFLOP/s (median of %d):\n", reps);
  std::printf("| M x N x K | sgemm | matmul primitive | gemm_f32 takes |\n|---|---:|---:|---|\n");
  const Config sgemm_cfg{GemmBackend::OneDnn, false, Bf16Mode::Native, F32Kernel::Sgemm};
  const Config matmul_cfg{GemmBackend::OneDnn, false, Bf16Mode::Native, F32Kernel::Matmul};
  for (auto [M, N, K] : {std::tuple<int64_t, int64_t, int64_t>{8192, 512, 512},
                         {8192, 256, 512},
                         {2048, 384, 2048},
                         {2048, 512, 2048},
                         {2048, 640, 2048},
                         {2048, 896, 2048},
                         {2304, 768, 2048},
                         {3072, 768, 2048},
                         {2048, 1280, 2048},
                         {2048, 2048, 2048},
                         {16384, 768, 333}}) {
    const Shape s{"dW", true, false, M, N, K, false};
    const double gs = 2.0 * M * N * K / time_gemm(ctx, sgemm_cfg, s, buf, reps) / 1e9;
    const double gm = 2.0 * M * N * K / time_gemm(ctx, matmul_cfg, s, buf, reps) / 1e9;
    std::printf("| %ldx%ldx%ld | %.1f | %.1f | %s |\n", (long)M, (long)N, (long)K, gs, gm,
                braid::onednn_f32_matmul_preferred(true, false, M, N, K) ? "matmul" : "sgemm");
  }

  // bf16 in inner-dimension slices (gemm_bf16_onednn_sliced) against one call, alternating
  // per call. Each shape is also run in the slices the rule uses for its layout (512 for A^T B,
  // max(1024, N) up to 4096 for A B) whether onednn_bf16_k_slice picks them or not, so the
  // shapes it leaves alone show what slicing would cost there. The benchmark model's and GPT-2
  // 124M's weight gradients (T N, K = 2048 tokens), the LM head's input gradient per 512-row
  // chunk (N N, K = vocabulary: 8192, GPT-2's 50304, Llama's 32000) and dw per chunk (K = 512).
  if (braid::native_bf16_available(GemmBackend::OneDnn)) {
    std::printf("\nbf16 on oneDNN, one call vs inner-dimension slices, GFLOP/s (median of %d):\n",
                reps);
    std::printf(
        "| M x N x K | ta | one call | in slices (size) | slices / one | gemm_bf16 takes |\n");
    std::printf("|---|---|---:|---:|---:|---|\n");
    struct KShape {
      bool ta;
      int64_t M, N, K;
    };
    const KShape kshapes[] = {
        {true, 1536, 512, 2048},  {true, 2048, 512, 2048},  {true, 512, 2048, 2048},
        {true, 512, 512, 2048},   {true, 2304, 768, 2048},  {true, 3072, 768, 2048},
        {true, 768, 3072, 2048},  {true, 768, 768, 2048},   {true, 8192, 512, 512},
        {true, 64, 2048, 4096},   {true, 1024, 256, 4096},  {true, 16, 768, 16384},
        {false, 512, 512, 8192},  {false, 512, 768, 50304}, {false, 512, 2048, 32000},
        {false, 256, 768, 50304}, {false, 64, 768, 50304}};
    const size_t most = size_t{2048} * 32000;
    braid::AlignedVector<braid::bf16> a16(most), b16(most);
    for (size_t i = 0; i < most; ++i) {
      a16[i] = buf.a16[i % buf.a16.size()];
      b16[i] = buf.b16[(i * 7) % buf.b16.size()];
    }
    braid::AlignedVector<float> c(4096 * 4096);
    const braid::GemmWorkspace::Lease scratch = ctx.gemm_workspace().lease();
    for (const KShape& k : kshapes) {
      const int64_t taken = braid::onednn_bf16_k_slice(k.ta, false, k.M, k.N, k.K);
      const int64_t forced = braid::onednn_bf16_slice_length(k.ta, k.N);
      const int64_t lda = k.ta ? k.M : k.K;
      std::vector<double> one, sliced;
      auto call = [&](int64_t sl) {
        const auto t0 = clock_type::now();
        braid::gemm_bf16_onednn_sliced(*scratch, sl, k.ta, false, k.M, k.N, k.K, 1.0f, a16.data(),
                                       lda, b16.data(), k.N, 0.0f, c.data(), k.N);
        return seconds_since(t0);
      };
      call(k.K);
      call(forced);
      for (int r = 0; r < reps; ++r) {
        one.push_back(call(k.K));
        sliced.push_back(call(forced));
      }
      const double flop = 2.0 * k.M * k.N * k.K, g1 = flop / median(one) / 1e9,
                   gs = flop / median(sliced) / 1e9;
      const std::string takes = taken < k.K ? std::to_string((k.K + taken - 1) / taken) +
                                                  " slices of " + std::to_string(taken)
                                            : "one call";
      std::printf("| %ldx%ldx%ld | %c | %.1f | %.1f (%ld) | %.2f | %s |\n", (long)k.M, (long)k.N,
                  (long)k.K, k.ta ? 'T' : 'N', g1, gs, (long)forced, gs / g1, takes.c_str());
    }
  }

  // 1024^3 (the GEMM peak probes' size) with every operand starting 0, 16 or 32 bytes past a
  // 64-byte boundary (malloc puts large blocks 16 bytes past a page), alternating per call.
  {
    constexpr int64_t n = 1024;
    const int offsets[] = {0, 16, 32};
    braid::AlignedVector<char> raw(static_cast<size_t>(3 * n * n * 4 + 3 * 64));
    std::printf("\nOperand alignment, %lldx%lldx%lld N N, GFLOP/s (best of %d):\n",
                static_cast<long long>(n), static_cast<long long>(n), static_cast<long long>(n),
                4 * reps);
    std::printf("| dtype | 64-byte aligned | +16 bytes | +32 bytes |\n|---|---:|---:|---:|\n");
    for (const bool bf16 : {false, true}) {
      if (bf16 && !braid::native_bf16_available(GemmBackend::OneDnn)) continue;
      double best[3] = {1e30, 1e30, 1e30};
      for (int r = 0; r < 4 * reps + 1; ++r)
        for (int o = 0; o < 3; ++o) {
          char* base = raw.data() + offsets[o];
          float* c = reinterpret_cast<float*>(base + 2 * n * n * 4 + 128);
          const auto t0 = clock_type::now();
          if (bf16)
            braid::gemm_bf16(
                ctx, false, false, n, n, n, 1.0f, reinterpret_cast<const braid::bf16*>(base), n,
                reinterpret_cast<const braid::bf16*>(base + n * n * 4 + 64), n, 0.0f, c, n);
          else
            braid::gemm_f32(ctx, false, false, n, n, n, 1.0f, reinterpret_cast<const float*>(base),
                            n, reinterpret_cast<const float*>(base + n * n * 4 + 64), n, 0.0f, c,
                            n);
          if (r > 0) best[o] = std::min(best[o], seconds_since(t0));
        }
      const double flop = 2.0 * n * n * n;
      std::printf("| %s | %.1f | %.1f | %.1f |\n", bf16 ? "bf16" : "f32", flop / best[0] / 1e9,
                  flop / best[1] / 1e9, flop / best[2] / 1e9);
    }
  }

  // Warm against cold operands. Every other table here calls a shape on the same buffers, which
  // after the first call sit in the caches; in a training step a GEMM's inputs and output come
  // from memory (the step's tensors are hundreds of MiB). Cold: each call takes its A, B and C
  // from the next stretch of a 1 GiB arena, so nothing of them is cached; warm: the arena's
  // first stretch every time. Alternating per call; the arena holds bf16 pairs that are also
  // finite f32 values, so both dtypes read it.
  {
    constexpr size_t arena_bytes = size_t{1} << 30;
    braid::AlignedVector<uint32_t> arena(arena_bytes / 4);
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < arena.size(); ++i) {
      const uint32_t h = static_cast<uint32_t>(i) * 2654435761u + 777u;
      const float x = static_cast<float>(h >> 8) / 16777216.0f - 0.5f,
                  y = static_cast<float>((h * 747796405u) >> 8) / 16777216.0f - 0.5f;
      arena[i] =
          static_cast<uint32_t>(braid::float_to_bf16(x).bits) << 16 | braid::float_to_bf16(y).bits;
    }
    char* base = reinterpret_cast<char*>(arena.data());
    std::printf(
        "\nWarm vs cold operands (the plan's GEMMs, median of %d alternating calls), "
        "GFLOP/s:\n",
        reps);
    std::printf("| shape | M x N x K | ta tb | dtype | warm | cold | cold / warm |\n");
    std::printf("|---|---|---|---|---:|---:|---:|\n");
    std::vector<Shape> cshapes = shapes;  // the 12 training shapes, then the peak probes' size
    cshapes.back() = {"peak probe", false, false, 1024, 1024, 1024, true};
    size_t next = 0;  // where the next cold call's operands start
    for (const bool bf16 : {false, true}) {
      if (bf16 && !braid::native_bf16_available(ctx.gemm().backend)) continue;
      double warm_total = 0, cold_total = 0;
      for (const Shape& s : cshapes) {
        auto page_bytes = [](int64_t elems, size_t el) {  // rounded up to whole 4 KiB pages
          return (static_cast<size_t>(elems) * el + 4095) / 4096 * 4096;
        };
        const size_t el = bf16 ? 2 : 4, a_bytes = page_bytes(s.M * s.K, el),
                     b_bytes = page_bytes(s.K * s.N, el), c_bytes = page_bytes(s.M * s.N, 4),
                     span = a_bytes + b_bytes + c_bytes;
        auto call = [&](size_t off) {
          const char* a = base + off;
          const char* b = a + a_bytes;
          float* c = reinterpret_cast<float*>(base + off + a_bytes + b_bytes);
          const int64_t lda = s.ta ? s.M : s.K, ldb = s.tb ? s.K : s.N;
          const auto t0 = clock_type::now();
          if (bf16)
            braid::gemm_bf16(ctx, s.ta, s.tb, s.M, s.N, s.K, 1.0f,
                             reinterpret_cast<const braid::bf16*>(a), lda,
                             reinterpret_cast<const braid::bf16*>(b), ldb, 0.0f, c, s.N);
          else
            braid::gemm_f32(ctx, s.ta, s.tb, s.M, s.N, s.K, 1.0f, reinterpret_cast<const float*>(a),
                            lda, reinterpret_cast<const float*>(b), ldb, 0.0f, c, s.N);
          return seconds_since(t0);
        };
        auto cold_offset = [&] {
          if (next < span || next + span > arena_bytes) next = span;  // never the warm stretch
          const size_t off = next;
          next += span;
          return off;
        };
        call(0);
        std::vector<double> warm, cold;
        for (int r = 0; r < reps; ++r) {
          warm.push_back(call(0));
          cold.push_back(call(cold_offset()));
        }
        const double w = median(warm), c = median(cold), flop = 2.0 * s.M * s.N * s.K;
        if (!s.peak) {
          warm_total += w;
          cold_total += c;
        }
        std::printf("| %s | %ldx%ldx%ld | %c %c | %s | %.1f | %.1f | %.2f |\n", s.name.c_str(),
                    (long)s.M, (long)s.N, (long)s.K, s.ta ? 'T' : 'N', s.tb ? 'T' : 'N',
                    bf16 ? "bf16" : "f32", flop / w / 1e9, flop / c / 1e9, w / c);
      }
      std::printf("| all 12 training shapes, ms | | | %s | %.1f | %.1f | %.2f |\n",
                  bf16 ? "bf16" : "f32", warm_total * 1e3, cold_total * 1e3,
                  warm_total / cold_total);
    }
  }

  std::printf("\nCalls from inside an OpenMP parallel region (%d threads, each its own block):\n",
              omp_get_max_threads());
  std::printf("| backend | dtype | M x N x K | total GFLOP/s | process threads after |\n");
  std::printf("|---|---|---|---:|---:|\n");
  const Config small_cfgs[] = {{GemmBackend::OneDnn, false, Bf16Mode::Native},
                               {GemmBackend::OpenBlas, false, Bf16Mode::Native},
                               {GemmBackend::Reference, false, Bf16Mode::Native},
                               {GemmBackend::OneDnn, true, Bf16Mode::Widen},
                               {GemmBackend::OpenBlas, true, Bf16Mode::Widen}};
  for (const Config& cfg : small_cfgs) {
    for (auto [M, N, K] : {std::tuple<int64_t, int64_t, int64_t>{256, 256, 64}, {256, 64, 256}}) {
      const double gf = in_region_gflops(ctx, cfg, M, N, K, 200);
      std::printf("| %s | %s | %ldx%ldx%ld | %.1f | %d |\n", cfg.label().c_str(),
                  cfg.bf16 ? "bf16" : "f32", (long)M, (long)N, (long)K, gf, process_threads());
    }
  }

  std::printf("\nOpenMP loop (4 x 32 MiB passes) right after a 1024^3 f32 GEMM:\n");
  for (const Config& cfg : {configs[0], configs[1]})
    std::printf("  after %-10s %.2f ms\n", cfg.label().c_str(), omp_loop_ms_after(ctx, cfg, buf));
  std::printf("\nmeasure_gemm_peak_f32(1.0): %.1f GFLOP/s\n",
              braid::measure_gemm_peak_f32(ctx, 1.0) / 1e9);
  return 0;
}
