// bench_qlinear: the quantised (QLoRA base) linear against the plain bf16 linear on the same
// shapes, side by side in one process: forward y = x W^T and input gradient dx = dy W.
// Usage: bench_qlinear [--reps N] [--out 4096] [--in 4096] [--tokens 512] [--quant nf4|int8]
//        (OMP_NUM_THREADS sets the thread count)
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "core/kernels/cpu/cpu_isa.h"
#include "core/kernels/cpu/dequantize_tile.h"
#include "core/kernels/linear.h"
#include "core/kernels/quantize.h"
#include "core/random.h"
#include "launch/train/exec_setup.h"
#include "tools/bench_cli.h"

namespace {

using clock_type = std::chrono::steady_clock;

// Median seconds per call after one warm-up.
double time_call(const std::function<void()>& f, int reps) {
  f();
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = clock_type::now();
    f();
    t.push_back(std::chrono::duration<double>(clock_type::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

braid::Tensor normal_f32(braid::ExecContext& ctx, const braid::Shape& shape, float std,
                         uint64_t stream) {
  braid::Tensor t = ctx.empty(shape, braid::DType::F32);
  braid::fill_normal(t, std, 7, stream);
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace braid;
  int reps = 10;
  int64_t out = 4096, in = 4096, tokens = 512;
  std::string quant = "nf4";
  CLI::App app{"bench_qlinear: quantised linear (QLoRA base) vs bf16 linear, same shapes"};
  app.add_option("--reps", reps, "timed repetitions per measurement (median)");
  app.add_option("--out", out, "output features (rows of W)");
  app.add_option("--in", in, "input features (columns of W)");
  app.add_option("--tokens", tokens, "rows of x (tokens)");
  app.add_option("--quant", quant, "nf4 or int8 (double quantisation on, blocks of 64)")
      ->check(CLI::IsMember({"nf4", "int8"}));
  if (const std::optional<int> code = bench::parse_args(app, argc, argv)) return *code;
  std::unique_ptr<ExecContext> owner = make_context(Device{}, 1);
  ExecContext& ctx = *owner;
  const Tensor w32 = normal_f32(ctx, {out, in}, 0.02f, 1);
  const Tensor w = w32.to(DType::BF16);
  const QuantizedWeight qw =
      quantize_weight(ctx, w32, quant == "nf4" ? QuantCode::Nf4 : QuantCode::Int8, 64, true);
  const Tensor x = normal_f32(ctx, {tokens, in}, 1.0f, 2).to(DType::BF16);
  const Tensor dy = normal_f32(ctx, {tokens, out}, 1.0f, 3).to(DType::BF16);
  Tensor y = ctx.empty({tokens, out}, DType::BF16);
  Tensor dx = ctx.empty({tokens, in}, DType::BF16);
  const Tensor none;
  const double flops = 2.0 * static_cast<double>(tokens) * out * in;
  std::printf(
      "# bench_qlinear: %d threads, ISA %s, W %ldx%ld, tokens %ld, %s base (%.4f bytes "
      "per weight) vs bf16 (2 bytes), bf16 activations, median of %d\n",
      omp_get_max_threads(), std::string(cpu_isa_name(ctx.cpu_isa())).c_str(),
      static_cast<long>(out), static_cast<long>(in), static_cast<long>(tokens), quant.c_str(),
      static_cast<double>(qw.bytes()) / static_cast<double>(out * in), reps);
  std::printf("| pass | bf16 ms | %s ms | bf16 GFLOP/s | %s GFLOP/s | %s / bf16 speed |\n",
              quant.c_str(), quant.c_str(), quant.c_str());
  std::printf("|---|---:|---:|---:|---:|---:|\n");
  auto row = [&](const char* pass, double plain, double q) {
    std::printf("| %s | %.2f | %.2f | %.1f | %.1f | %.2fx |\n", pass, plain * 1e3, q * 1e3,
                flops / plain * 1e-9, flops / q * 1e-9, plain / q);
  };
  row("forward", time_call([&] { linear_forward(ctx, y, x, w, none); }, reps),
      time_call([&] { linear_forward_quantized(ctx, y, x, qw, none); }, reps));
  row("input grad", time_call([&] { linear_backward_input(ctx, dx, dy, w); }, reps),
      time_call([&] { linear_backward_input_quantized(ctx, dx, dy, qw); }, reps));
  // Where the difference goes: the dequantisation alone (the whole weight into bf16, as the
  // tiles are made: threads over parts), and the weight's absmax values read back.
  Tensor wb = ctx.empty({out, in}, DType::BF16);
  const double deq = time_call(
      [&] {
        const Tensor absmax = weight_absmax(ctx, qw);
        const int64_t n = out * in, chunk = 16384;
#pragma omp parallel for schedule(static)
        for (int64_t c = 0; c < (n + chunk - 1) / chunk; ++c)
          cpu::dequantize_tile(ctx.cpu_isa(), wb.data<bf16>() + c * chunk, DType::BF16,
                               qw.q.data<uint8_t>(), absmax.f32(), qw.code, qw.block, c * chunk,
                               std::min(chunk, n - c * chunk));
      },
      reps);
  std::printf(
      "\ndequantising the whole weight into bf16: %.2f ms (%.2f ns per weight per thread)\n",
      deq * 1e3, deq * 1e9 * omp_get_max_threads() / static_cast<double>(out * in));
  return 0;
}
