// Training throughput benchmark: tokens/s and achieved FLOP/s of a full AdamW step, next to
// the GEMM peak measured in the same run. --precision bf16|fp16 trains with 16-bit weights and
// activations and f32 masters (as train.precision does), after an fp32 run of the same model
// for the tokens/s ratio, and measures the bf16 GEMM peak (gemm_bf16) beside the f32 one. The
// last table splits the timed steps by kernel group, as the training log does (core/profile.h).
//
//   build/bench_train [--family gpt2] [--vocab 8192] [--ctx 256] [--layers 6] [--width 512]
//                     [--heads 8] [--batch 8] [--steps 6] [--warmup 2] [--precision fp32]
//                     [--peak-seconds 2] (0: no GEMM peaks, e.g. under callgrind)
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/kernels/cpu/convert.h"
#include "core/kernels/elementwise.h"
#include "core/kernels/gemm.h"
#include "core/memory.h"
#include "core/models/transformer.h"
#include "core/precision.h"
#include "core/profile.h"
#include "core/random.h"
#include "launch/train/exec_setup.h"
#include "optim/adamw.h"
#include "optim/master_weights.h"
#include "tools/bench_cli.h"

using namespace braid;

namespace {

struct Result {
  double sec = 0, loss = 0, peak_mib = 0;
  KernelTimes kernels;  // seconds per timed step charged to each kernel group
};

// Trains `steps` timed steps (after `warmup`) with weights/activations in `dt`.
Result run(ExecContext& ctx, const ModelConfig& cfg, int batch, int steps, int warmup, DType dt) {
  const int T = cfg.context_length;
  ctx.allocator().reset_peaks();
  Transformer model(ctx, cfg);
  model.init_weights();
  std::unique_ptr<MasterWeights> masters;
  if (dt != DType::F32) masters = std::make_unique<MasterWeights>(ctx, model.parameters(), dt);
  OptimConfig ocfg;
  AdamW opt(ctx, masters ? masters->params() : model.parameters(), ocfg);
  Tensor tokens = Tensor::empty({batch, T}, DType::I32),
         targets = Tensor::empty({batch, T}, DType::I32);
  for (int64_t i = 0; i < tokens.numel(); ++i) {
    tokens.i32()[i] = static_cast<int32_t>(mix64(i) % cfg.vocab_size);
    targets.i32()[i] = static_cast<int32_t>(mix64(i + 1) % cfg.vocab_size);
  }
  // fp16: a fixed loss scale of 1024 (no overflow on this model), unscaled before clipping.
  const float loss_scale = dt == DType::F16 ? 1024.0f : 1.0f;
  const float scale = loss_scale / static_cast<float>(batch * T);
  auto step = [&] {
    model.zero_grad(ctx);
    MicroBatch mb(ctx);
    LossSum l = model.forward_backward(mb, tokens, targets, scale);
    double norm = global_grad_norm(ctx, model.parameters());
    if (loss_scale != 1.0f) {
      for (Parameter* p : model.parameters()) scale_inplace(ctx, p->grad(), 1.0f / loss_scale);
      norm /= loss_scale;
    }
    opt.clip(norm, 1.0f);  // as the trainer does: the factor is applied inside the update
    if (masters)
      masters->step(opt, 1e-4f);
    else
      opt.step(1e-4f);
    return l.sum / l.count;
  };
  for (int i = 0; i < warmup; ++i) step();
  const KernelTimes k0 = ctx.profiler().times();
  const auto t0 = std::chrono::steady_clock::now();
  Result r;
  for (int i = 0; i < steps; ++i) r.loss = step();
  r.sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / steps;
  r.kernels = ctx.profiler().times() - k0;
  for (double& s : r.kernels.seconds) s /= steps;
  r.peak_mib = ctx.allocator().stats().peak_total / 1048576.0;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  ModelConfig cfg;
  cfg.family = "gpt2";
  cfg.vocab_size = 8192;
  cfg.context_length = 256;
  cfg.n_layer = 6;
  cfg.n_embd = 512;
  cfg.n_head = 8;
  int batch = 8, steps = 6, warmup = 2;
  double peak_seconds = 2.0;
  std::string precision = "fp32";
  DType dtype = DType::F32;
  CLI::App app{"bench_train: tokens/s, MFU and peak memory of a training step", "bench_train"};
  app.option_defaults()->always_capture_default();
  bench::add_model_options(app, cfg);
  app.add_option("--batch", batch, "sequences per step");
  app.add_option("--steps", steps, "timed steps");
  app.add_option("--warmup", warmup, "untimed steps first");
  app.add_option("--precision", precision, "fp32, bf16 or fp16");
  app.add_option("--peak-seconds", peak_seconds,
                 "seconds per GEMM peak measurement; 0 skips them (e.g. under callgrind)")
      ->check(CLI::NonNegativeNumber);
  if (const std::optional<int> code = bench::parse_args(app, argc, argv)) return *code;
  if (const std::optional<Precision> p = enum_from_name<Precision>(precision)) {
    dtype = precision_dtype(*p);
  } else {
    std::fprintf(stderr, "--precision %s: expected %s\n", precision.c_str(),
                 enum_choices<Precision>().c_str());
    return 2;
  }
  cfg.validate();
  const int T = cfg.context_length;
  std::printf(
      "bench_train: %s vocab %d ctx %d layers %d width %d heads %d, batch %d x %d, %s, "
      "AdamW, %d threads, gemm %s\n",
      cfg.family.c_str(), cfg.vocab_size, T, cfg.n_layer, cfg.n_embd, cfg.n_head, batch, T,
      std::string(dtype_name(dtype)).c_str(), omp_get_max_threads(),
      gemm_backend_name(gemm_plan_from_env()).c_str());

  const std::unique_ptr<ExecContext> ctx_owner = make_cpu_context();
  ExecContext& ctx = *ctx_owner;
  if (dtype != DType::F32)
    std::printf("%s\n%s\n", gemm_bf16_description(ctx).c_str(),
                cpu::convert_isa_description(ctx.cpu_isa()).c_str());
  const double tokens_per_step = static_cast<double>(batch) * T;
  const double model_flops = cfg.flops_per_token(T) * tokens_per_step;
  // fp32 always runs: the baseline of the tokens/s ratio of a 16-bit run.
  const Result f32 = run(ctx, cfg, batch, steps, warmup, DType::F32);
  const Result low = dtype == DType::F32 ? f32 : run(ctx, cfg, batch, steps, warmup, dtype);

  // The GEMM peaks in the same run, so the ratios do not depend on how busy the machine was.
  const bool peaks = peak_seconds > 0;
  const double peak = peaks ? measure_gemm_peak_f32(ctx, peak_seconds) : 0.0;
  const double peak_bf16 =
      peaks && dtype != DType::F32 ? measure_gemm_peak_bf16(ctx, peak_seconds) : 0.0;
  std::printf("\n%-34s %12s\n", "metric", "value");
  std::printf("%-34s %12lld\n", "parameters", static_cast<long long>(cfg.num_params()));
  std::printf("%-34s %12.1f\n", "model GFLOP per step", model_flops / 1e9);
  std::printf("%-34s %12.4f\n", "model MFLOP per token", cfg.flops_per_token(T) / 1e6);
  auto rows = [&](const char* tag, const Result& r) {
    std::printf("%s%-*s %12.3f\n", tag, 34 - static_cast<int>(std::strlen(tag)), " step time (s)",
                r.sec);
    std::printf("%s%-*s %12.0f\n", tag, 34 - static_cast<int>(std::strlen(tag)), " tokens/s",
                tokens_per_step / r.sec);
    std::printf("%s%-*s %12.1f\n", tag, 34 - static_cast<int>(std::strlen(tag)),
                " training GFLOP/s", model_flops / r.sec / 1e9);
    std::printf("%s%-*s %12.1f\n", tag, 34 - static_cast<int>(std::strlen(tag)),
                " peak tensor memory (MiB)", r.peak_mib);
    std::printf("%s%-*s %12.4f\n", tag, 34 - static_cast<int>(std::strlen(tag)), " last loss",
                r.loss);
  };
  rows("f32", f32);
  if (peaks) {
    std::printf("%-34s %12.1f\n", "f32 GEMM peak GFLOP/s", peak / 1e9);
    std::printf("%-34s %11.1f%%\n", "f32 training / f32 GEMM peak",
                100.0 * model_flops / f32.sec / peak);
  }
  if (dtype != DType::F32) {
    const std::string tag(dtype_name(dtype));
    rows(tag.c_str(), low);
    if (peaks) {
      std::printf("%-34s %12.1f\n", "bf16 GEMM peak GFLOP/s", peak_bf16 / 1e9);
      std::printf("%-34s %11.1f%%\n", (tag + " training / bf16 GEMM peak").c_str(),
                  100.0 * model_flops / low.sec / peak_bf16);
    }
    std::printf("%-34s %12.2f\n", (tag + " / f32 tokens/s").c_str(), f32.sec / low.sec);
  }

  // Where the step's time goes: the step log's kernel groups, seconds per step and share.
  std::printf("\n%-14s %10s %7s", "kernel group", "f32 s", "share");
  if (dtype != DType::F32)
    std::printf(" %10s %7s", (std::string(dtype_name(dtype)) + " s").c_str(), "share");
  std::printf("\n");
  auto split_row = [&](const char* name, double a, double b) {
    std::printf("%-14s %10.3f %6.1f%%", name, a, 100.0 * a / f32.sec);
    if (dtype != DType::F32) std::printf(" %10.3f %6.1f%%", b, 100.0 * b / low.sec);
    std::printf("\n");
  };
  for (int g = 0; g < kKernelGroups; ++g)
    split_row(kernel_group_name(static_cast<KernelGroup>(g)), f32.kernels.seconds[g],
              low.kernels.seconds[g]);
  split_row("other", f32.sec - f32.kernels.total(), low.sec - low.kernels.total());
  split_row("step", f32.sec, low.sec);
  return 0;
}
