// bench_gpu: training throughput of one GPU, as tokens/s and MFU, for a GPT-2 124M-shaped model
// and a ~1B Llama-shaped one. Each step is what `braid train` runs on a GPU with bf16 (or the
// precision given): zero the gradients, forward + backward of every micro-batch, the gradient
// norm, then AdamW on f32 master weights and the cast back to the compute dtype, all through
// braid's kernels on the context's stream. The first steps warm up (plans, caches) and are not
// timed; the timed steps end with a stream synchronisation. MFU = model FLOPs (6N per token plus
// attention, ModelConfig::flops_per_token) / step time / the GPU's dense peak for the dtype
// (table below, by device name). Memory: the allocator's peak by category.
//   bench_gpu [--model gpt2-124m|llama-1b] [--batch B] [--seq T] [--steps N] [--warmup W]
//             [--precision bf16|fp32]
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/kernels/cuda/runtime.h"
#include "core/kernels/elementwise.h"
#include "core/kernels/optimizer.h"
#include "core/micro_batch.h"
#include "core/models/transformer.h"
#include "core/random.h"

using namespace braid;

namespace {

struct Peak {
  const char* name;
  double bf16_tflops, fp32_tflops;  // dense, published
};
// Published dense peaks (no sparsity); fp32 is the non-tensor-core rate.
const Peak kPeaks[] = {{"H200", 989, 67},   {"H100", 989, 67},   {"A100", 312, 19.5},
                       {"L40S", 362, 91.6}, {"4090", 165, 82.6}, {"3090", 71, 35.6},
                       {"5090", 209, 104.8}};

double peak_tflops(const std::string& device, bool bf16) {
  for (const Peak& p : kPeaks)
    if (device.find(p.name) != std::string::npos) return bf16 ? p.bf16_tflops : p.fp32_tflops;
  return 0.0;
}

ModelConfig model_named(const std::string& name) {
  ModelConfig c;
  if (name == "gpt2-124m") {
    c.family = "gpt2";
    c.vocab_size = 50304;
    c.context_length = 1024;
    c.n_layer = 12;
    c.n_embd = 768;
    c.n_head = 12;
  } else if (name == "llama-1b") {  // Llama 3.2 1B's shape
    c.family = "llama";
    c.vocab_size = 128256;
    c.context_length = 2048;
    c.n_layer = 16;
    c.n_embd = 2048;
    c.n_head = 32;
    c.n_kv_head = 8;
    c.ffn_hidden = 8192;
  } else {
    std::fprintf(stderr, "bench_gpu: unknown --model %s (gpt2-124m or llama-1b)\n", name.c_str());
    std::exit(2);
  }
  c.seed = 1;
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_name = "gpt2-124m", precision = "bf16";
  int64_t B = 16, T = 1024;
  int steps = 10, warmup = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--model")
      model_name = v;
    else if (k == "--batch")
      B = std::atoll(v.c_str());
    else if (k == "--seq")
      T = std::atoll(v.c_str());
    else if (k == "--steps")
      steps = std::atoi(v.c_str());
    else if (k == "--warmup")
      warmup = std::atoi(v.c_str());
    else if (k == "--precision")
      precision = v;
    else {
      std::fprintf(stderr, "bench_gpu: unknown option %s\n", k.c_str());
      return 2;
    }
  }
  if (cuda::device_count() == 0) {
    std::printf("bench_gpu: skipped: %s\n", cuda::unavailable_reason().c_str());
    return 77;
  }
  const ModelConfig cfg = model_named(model_name);
  const bool bf16 = precision == "bf16";
  ExecOptions o;
  o.device = Device::cuda(0);
  ExecContext ctx(o);
  const cuda::DeviceProps dev = cuda::device_props(0);

  Transformer model(ctx, cfg);
  model.init_weights();
  // f32 masters and moments for every parameter; the model computes in the compute dtype.
  struct Slot {
    Parameter* p;
    Tensor master, m, v;
  };
  std::vector<Slot> slots;
  for (Parameter* p : model.parameters()) {
    Slot s{p, p->value.clone(MemCategory::MasterWeights),
           ctx.zeros(p->value.shape(), DType::F32, MemCategory::OptimizerState),
           ctx.zeros(p->value.shape(), DType::F32, MemCategory::OptimizerState)};
    if (bf16) p->value = p->value.to(DType::BF16, MemCategory::Weights);
    slots.push_back(std::move(s));
  }
  model.refresh_parameters();
  Tensor tokens = Tensor::empty({B, T}, DType::I32), targets = Tensor::empty({B, T}, DType::I32);
  for (int64_t i = 0; i < B * T; ++i) {
    tokens.i32()[i] = static_cast<int32_t>(mix64(2 * i) % static_cast<uint64_t>(cfg.vocab_size));
    targets.i32()[i] =
        static_cast<int32_t>(mix64(2 * i + 1) % static_cast<uint64_t>(cfg.vocab_size));
  }
  Tensor dtok = ctx.to_device(tokens), dtgt = ctx.to_device(targets);
  const float scale = 1.0f / static_cast<float>(B * T);
  AdamWStep k{0.9f, 0.95f, 1e-8f, 1e-4f, 1.0f, 0.0f};

  double loss = 0;
  auto step = [&] {
    model.zero_grad(ctx);
    MicroBatch mb(ctx);
    const LossSum l = model.forward_backward(mb, dtok, dtgt, scale);
    loss = l.sum / static_cast<double>(l.count);  // reads the loss: one sync per step
    // The gradient norm as the trainer takes it: every parameter's sum of squares, one wait.
    std::vector<Tensor> grads;
    for (Slot& s : slots) grads.push_back(s.p->grad());
    double sq = 0;
    for (double q : sum_squares_each(ctx, grads)) sq += q;
    (void)std::sqrt(sq);
    for (Slot& s : slots) {
      adamw_update(ctx, s.master, s.m, s.v, s.p->grad(), k);
      cast(ctx, s.p->value, s.master);  // bf16: rounded; fp32: a copy on the stream
    }
  };
  for (int i = 0; i < warmup; ++i) step();
  ctx.stream().synchronize();
  ctx.allocator().reset_peaks();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i) step();
  ctx.stream().synchronize();
  const double sec =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / steps;
  const double tok_s = static_cast<double>(B * T) / sec;
  const double flops = cfg.flops_per_token(static_cast<int>(T)) * static_cast<double>(B * T) / sec;
  const double peak = peak_tflops(dev.name, bf16) * 1e12;
  const MemoryStats mem = ctx.allocator().stats();
  std::printf(
      "| model | device | precision | batch x seq | step ms | tokens/s | TFLOP/s | MFU | peak "
      "memory | loss |\n");
  std::printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
  std::printf(
      "| %s (%.0fM) | %s | %s | %lld x %lld | %.1f | %.0f | %.1f | %s | %.2f GiB (%s) | %.3f |\n",
      model_name.c_str(), cfg.num_params() / 1e6, dev.name.c_str(), precision.c_str(),
      static_cast<long long>(B), static_cast<long long>(T), sec * 1e3, tok_s, flops / 1e12,
      peak > 0 ? (std::to_string(static_cast<int>(std::lround(100 * flops / peak))) + "%").c_str()
               : "n/a",
      static_cast<double>(mem.peak_total) / (1 << 30), memory_peaks_line(mem).c_str(), loss);
  return 0;
}
