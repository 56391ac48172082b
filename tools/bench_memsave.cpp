// Memory savers benchmark: peak memory by category and tokens/s of full AdamW steps (fp32, or
// bf16 with f32 master weights) with activation checkpointing none / selective / full, and
// LoRA against full fine-tuning. The variants run interleaved, one step each per round (the
// machine is shared and its speed drifts), and the table reports medians and ratios to the
// first variant.
//
//   build/bench_memsave [--part ckpt|lora|both] [--family gpt2] [--vocab 8192] [--ctx 256]
//                       [--layers 6] [--width 256] [--heads 8] [--batch 4] [--rounds 5]
//                       [--rank 8] [--targets q,v] [--precision fp32|bf16]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "core/kernels/gemm.h"
#include "core/models/checkpointing.h"
#include "core/models/lora.h"
#include "core/precision.h"
#include "core/random.h"
#include "launch/train/exec_setup.h"
#include "optim/adamw.h"
#include "optim/master_weights.h"
#include "tools/bench_cli.h"

using namespace braid;

namespace {

constexpr double kMiB = 1048576.0;

struct Variant {
  std::string name;
  std::unique_ptr<ExecContext> ctx;
  std::unique_ptr<Transformer> model;
  std::unique_ptr<MasterWeights> masters;  // bf16 only: the optimizer updates these
  std::unique_ptr<AdamW> opt;
  std::vector<double> times;
  MemoryStats peaks;  // of the last measured step, from a fresh peak measurement
};

Variant make_variant(const std::string& name, const ModelConfig& cfg, const std::string& ckpt,
                     const LoraConfig* lora, DType precision) {
  Variant v;
  v.name = name;
  v.ctx = make_cpu_context();
  v.model = std::make_unique<Transformer>(*v.ctx, cfg);
  v.model->init_weights();
  if (lora) apply_lora(*v.model, *lora, cfg.seed);
  apply_checkpointing(*v.model, parse_enum<Checkpointing>("checkpointing", ckpt), 1);
  std::vector<Parameter*> params = v.model->parameters();
  if (precision != DType::F32) {  // as train.precision does it (optim/mixed_precision.cpp)
    v.masters = std::make_unique<MasterWeights>(*v.ctx, params, precision);
    params = v.masters->params();
  }
  v.opt = std::make_unique<AdamW>(*v.ctx, params, OptimConfig{});
  return v;
}

double step(Variant& v, const Tensor& tokens, const Tensor& targets, float scale) {
  ExecContext& ctx = *v.ctx;
  ctx.allocator().reset_peaks();
  const auto t0 = std::chrono::steady_clock::now();
  v.model->zero_grad(ctx);
  MicroBatch mb(ctx);
  mb.dropout_seed = 1;
  v.model->forward_backward(mb, tokens, targets, scale);
  clip_grad_norm(ctx, v.model->parameters(), global_grad_norm(ctx, v.model->parameters()), 1.0f);
  if (v.masters)
    v.masters->step(*v.opt, 1e-4f);
  else
    v.opt->step(1e-4f);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  v.peaks = ctx.allocator().stats();
  return s;
}

double median(std::vector<double> x) {
  std::sort(x.begin(), x.end());
  return x[x.size() / 2];
}

void run(std::vector<Variant>& vs, const ModelConfig& cfg, int batch, int rounds) {
  const int T = cfg.context_length;
  Tensor tokens = Tensor::empty({batch, T}, DType::I32),
         targets = Tensor::empty({batch, T}, DType::I32);
  for (int64_t i = 0; i < tokens.numel(); ++i) {
    tokens.i32()[i] = static_cast<int32_t>(mix64(i) % cfg.vocab_size);
    targets.i32()[i] = static_cast<int32_t>(mix64(i + 1) % cfg.vocab_size);
  }
  const float scale = 1.0f / static_cast<float>(batch * T);
  for (Variant& v : vs) step(v, tokens, targets, scale);  // warm-up (optimizer state, caches)
  for (int r = 0; r < rounds; ++r)
    for (Variant& v : vs) v.times.push_back(step(v, tokens, targets, scale));
  const double tok = static_cast<double>(batch) * T;
  const int act = static_cast<int>(MemCategory::Activations);
  std::printf("\n%-22s %9s %9s %9s %9s %9s %9s %9s %10s %9s %9s %9s\n", "variant", "step s",
              "tok/s", "weights", "master", "grads", "optim", "activ", "workspace", "total",
              "time x", "activ x");
  const double t0 = median(vs[0].times);
  const double a0 = static_cast<double>(vs[0].peaks.peak_bytes[act]);
  for (Variant& v : vs) {
    const double t = median(v.times);
    auto mib = [&](MemCategory c) { return v.peaks.peak_bytes[static_cast<int>(c)] / kMiB; };
    std::printf("%-22s %9.3f %9.0f %9.1f %9.1f %9.1f %9.1f %9.1f %10.1f %9.1f %9.2f %9.2f\n",
                v.name.c_str(), t, tok / t, mib(MemCategory::Weights),
                mib(MemCategory::MasterWeights), mib(MemCategory::Grads),
                mib(MemCategory::OptimizerState), mib(MemCategory::Activations),
                mib(MemCategory::Workspace), v.peaks.peak_total / kMiB, t / t0,
                a0 / static_cast<double>(v.peaks.peak_bytes[act]));
  }
  std::printf(
      "(memory: peak MiB per category during one step; time x: median step time / the "
      "first row's; activ x: the first row's peak activations / this row's)\n");
}

}  // namespace

int main(int argc, char** argv) {
  ModelConfig cfg;
  cfg.family = "gpt2";
  cfg.vocab_size = 8192;
  cfg.context_length = 256;
  cfg.n_layer = 6;
  cfg.n_embd = 256;
  cfg.n_head = 8;
  int batch = 4, rounds = 5;
  std::string part = "both", precision = "fp32";
  LoraConfig lora;
  lora.rank = 8;
  std::string targets = "q,v";
  CLI::App app{"bench_memsave: memory and step time of activation checkpointing and LoRA",
               "bench_memsave"};
  app.option_defaults()->always_capture_default();
  app.add_option("--part", part, "ckpt, lora or both");
  bench::add_model_options(app, cfg);
  app.add_option("--batch", batch, "sequences per step");
  app.add_option("--rounds", rounds, "interleaved rounds (medians over them)");
  app.add_option("--precision", precision, "fp32 or bf16");
  app.add_option("--rank", lora.rank, "LoRA rank");
  app.add_option("--targets", targets, "LoRA targets, comma-separated");
  if (const std::optional<int> code = bench::parse_args(app, argc, argv)) return *code;
  lora.targets.clear();
  std::stringstream ss(targets);
  for (std::string t; std::getline(ss, t, ',');) lora.targets.push_back(t);
  const std::optional<Precision> prec = enum_from_name<Precision>(precision);
  if (!prec || *prec == Precision::FP16) {
    std::fprintf(stderr, "--precision is '%s'; expected fp32 or bf16\n", precision.c_str());
    return 2;
  }
  const DType dt = precision_dtype(*prec);
  std::printf(
      "bench_memsave: %d threads, gemm %s, %s AdamW steps, batch %d x %d, %d rounds "
      "interleaved (medians)\n",
      omp_get_max_threads(), gemm_backend_name(gemm_plan_from_env()).c_str(), precision.c_str(),
      batch, cfg.context_length, rounds);
  if (part == "ckpt" || part == "both") {
    cfg.validate();
    std::printf("\n== activation checkpointing: %s, %d layers, width %d, vocab %d ==\n",
                cfg.family.c_str(), cfg.n_layer, cfg.n_embd, cfg.vocab_size);
    std::vector<Variant> vs;
    for (const char* m : {"none", "selective", "full"})
      vs.push_back(make_variant(m, cfg, m, nullptr, dt));
    run(vs, cfg, batch, rounds);
  }
  if (part == "lora" || part == "both") {
    ModelConfig l = cfg;
    l.family = "llama";
    l.n_kv_head = 0;
    l.validate();
    lora.validate();
    std::printf("\n== LoRA vs full fine-tuning: llama, %d layers, width %d, vocab %d, rank %d ==\n",
                l.n_layer, l.n_embd, l.vocab_size, lora.rank);
    std::vector<Variant> vs;
    vs.push_back(make_variant("full fine-tuning", l, "none", nullptr, dt));
    vs.push_back(make_variant("lora", l, "none", &lora, dt));
    LoraConfig all = lora;
    all.targets = {"all-linear"};
    vs.push_back(make_variant("lora all-linear", l, "none", &all, dt));
    run(vs, l, batch, rounds);
  }
  return 0;
}
