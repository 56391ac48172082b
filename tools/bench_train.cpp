// Training throughput benchmark: tokens/s and achieved FLOP/s of a full fp32 AdamW step,
// next to the f32 GEMM peak measured in the same run.
//
//   build/bench_train [--family gpt2] [--vocab 8192] [--ctx 256] [--layers 6] [--width 512]
//                     [--heads 8] [--batch 8] [--steps 6] [--warmup 2]
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "launch/exec_setup.h"
#include "core/kernels/gemm.h"
#include "core/memory.h"
#include "core/models/transformer.h"
#include "core/random.h"
#include "optim/adamw.h"

using namespace braid;

int main(int argc, char** argv) {
  ModelConfig cfg;
  cfg.family = "gpt2";
  cfg.vocab_size = 8192;
  cfg.context_length = 256;
  cfg.n_layer = 6;
  cfg.n_embd = 512;
  cfg.n_head = 8;
  int batch = 8, steps = 6, warmup = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const char* v = argv[i + 1];
    if (k == "--family") cfg.family = v;
    else if (k == "--vocab") cfg.vocab_size = std::atoi(v);
    else if (k == "--ctx") cfg.context_length = std::atoi(v);
    else if (k == "--layers") cfg.n_layer = std::atoi(v);
    else if (k == "--width") cfg.n_embd = std::atoi(v);
    else if (k == "--heads") cfg.n_head = std::atoi(v);
    else if (k == "--batch") batch = std::atoi(v);
    else if (k == "--steps") steps = std::atoi(v);
    else if (k == "--warmup") warmup = std::atoi(v);
    else { std::fprintf(stderr, "unknown option %s\n", k.c_str()); return 2; }
  }
  cfg.validate();
  const int T = cfg.context_length;
  std::printf("bench_train: %s vocab %d ctx %d layers %d width %d heads %d, batch %d x %d, f32, "
              "AdamW, %d threads, gemm %s\n",
              cfg.family.c_str(), cfg.vocab_size, T, cfg.n_layer, cfg.n_embd, cfg.n_head, batch, T,
              omp_get_max_threads(), gemm_backend_name(gemm_plan_from_env()).c_str());

  const std::unique_ptr<ExecContext> ctx_owner = make_cpu_context();
  ExecContext& ctx = *ctx_owner;
  Transformer model(ctx, cfg);
  model.init_weights();
  OptimConfig ocfg;
  AdamW opt(ctx, model.parameters(), ocfg);
  Tensor tokens = Tensor::empty({batch, T}, DType::I32), targets = Tensor::empty({batch, T}, DType::I32);
  for (int64_t i = 0; i < tokens.numel(); ++i) {
    tokens.i32()[i] = static_cast<int32_t>(mix64(i) % cfg.vocab_size);
    targets.i32()[i] = static_cast<int32_t>(mix64(i + 1) % cfg.vocab_size);
  }
  const float scale = 1.0f / static_cast<float>(batch * T);
  auto step = [&] {
    model.zero_grad(ctx);
    MicroBatch mb(ctx);
    LossSum l = model.forward_backward(mb, tokens, targets, scale);
    const double norm = global_grad_norm(ctx, model.parameters());
    clip_grad_norm(ctx, model.parameters(), norm, 1.0f);
    opt.step(1e-4f);
    return l.sum / l.count;
  };
  for (int i = 0; i < warmup; ++i) step();
  const auto t0 = std::chrono::steady_clock::now();
  double loss = 0;
  for (int i = 0; i < steps; ++i) loss = step();
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / steps;

  // The GEMM peak in the same run, so the ratio does not depend on how busy the machine was.
  const double peak = measure_gemm_peak_f32(ctx, 2.0);
  const double tokens_per_step = static_cast<double>(batch) * T;
  const double flops = cfg.flops_per_token(T) * tokens_per_step / sec;
  std::printf("\n%-28s %12s\n", "metric", "value");
  std::printf("%-28s %12lld\n", "parameters", static_cast<long long>(cfg.num_params()));
  std::printf("%-28s %12.1f\n", "model GFLOP per step", cfg.flops_per_token(T) * tokens_per_step / 1e9);
  std::printf("%-28s %12.3f\n", "step time (s)", sec);
  std::printf("%-28s %12.0f\n", "tokens/s", tokens_per_step / sec);
  std::printf("%-28s %12.1f\n", "training GFLOP/s", flops / 1e9);
  std::printf("%-28s %12.1f\n", "f32 GEMM peak GFLOP/s", peak / 1e9);
  std::printf("%-28s %11.1f%%\n", "training / GEMM peak", 100.0 * flops / peak);
  std::printf("%-28s %12.1f\n", "peak tensor memory (MiB)", ctx.allocator().stats().peak_total / 1048576.0);
  std::printf("%-28s %12.4f\n", "last loss", loss);
  return 0;
}
