// A whole forward and backward on the GPU against the CPU: tiny GPT-2 and Llama models (and a
// Llama with Mistral's sliding window, Qwen2's q/k/v biases and Llama 3.1's RoPE scaling) with the
// same weights and batch, plain, with selective and full activation checkpointing, with LoRA,
// and with bf16 weights; the loss and every parameter's gradient must agree.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "core/micro_batch.h"
#include "core/models/checkpointing.h"
#include "core/models/lora.h"
#include "core/models/transformer.h"
#include "core/random.h"
#include "tests/gpu/gpu_test_util.h"

namespace braid::gpu_test {
namespace {

ModelConfig small(const std::string& family) {
  ModelConfig c;
  c.family = family;
  c.vocab_size = 97;  // not a multiple of any chunk
  c.context_length = 33;
  c.n_layer = 2;
  c.n_embd = 48;
  c.n_head = 4;
  if (family != "gpt2") {
    c.family = "llama";
    c.n_kv_head = 2;
    c.ffn_hidden = 80;
  }
  // Mistral/Qwen2-style: a sliding window shorter than the sequence, q/k/v biases, and the
  // Llama 3.1 RoPE scaling.
  if (family == "llama_window") {
    c.sliding_window = 7;
    c.qkv_bias = true;
    c.rope_type = RopeType::Llama3;
    c.rope_factor = 8.0f;
    c.rope_original_context = 16;
  }
  c.init_std = 0.2f;
  c.seed = 11;
  return c;
}

enum class Mode { Plain, Selective, Full, Lora, Bf16 };

std::string mode_name(Mode m) {
  switch (m) {
    case Mode::Plain:
      return "plain";
    case Mode::Selective:
      return "selective";
    case Mode::Full:
      return "full";
    case Mode::Lora:
      return "lora";
    case Mode::Bf16:
      return "bf16";
  }
  return "";
}

// The model on `ctx` with its passes; the same weights on every device.
std::unique_ptr<Transformer> build(ExecContext& ctx, const std::string& family, Mode mode) {
  auto m = std::make_unique<Transformer>(ctx, small(family));
  m->init_weights();
  for (Parameter* p : m->parameters())
    if (p->value.ndim() == 1) fill_normal(p->value, 0.3f, 5, hash_string(p->name));
  if (mode == Mode::Selective) apply_checkpointing(*m, Checkpointing::Selective);
  if (mode == Mode::Full) apply_checkpointing(*m, Checkpointing::Full);
  if (mode == Mode::Lora) {
    LoraConfig lc;
    lc.rank = 4;
    lc.targets = {"all-linear"};
    apply_lora(*m, lc, 3);
    // B starts at zero; give it values so the adapter's path shows in the loss.
    for (Parameter* p : m->parameters())
      if (p->name.find("lora_B") != std::string::npos)
        fill_normal(p->value, 0.1f, 9, hash_string(p->name));
  }
  if (mode == Mode::Bf16)
    for (Parameter* p : m->parameters())
      if (p->value.ndim() == 2) p->value = p->value.to(DType::BF16, MemCategory::Weights);
  m->refresh_parameters();
  return m;
}

class GpuStep : public GpuTest,
                public ::testing::WithParamInterface<std::tuple<std::string, Mode>> {};

TEST_P(GpuStep, LossAndEveryGradientMatchTheCpu) {
  const auto [family, mode] = GetParam();
  auto on_cpu = build(cpu(), family, mode);
  auto on_gpu = build(gpu(), family, mode);
  const int64_t B = 3, T = 33;
  Tensor tokens = random_tokens({B, T}, 97, 1), targets = random_tokens({B, T}, 97, 2);
  targets.i32()[5] = -1;  // an ignored position
  const float scale = 1.0f / static_cast<float>(B * T - 1);

  on_cpu->zero_grad(cpu());
  MicroBatch mb_cpu(cpu());
  const LossSum l_cpu = on_cpu->forward_backward(mb_cpu, tokens, targets, scale);
  on_gpu->zero_grad(gpu());
  MicroBatch mb_gpu(gpu());
  const LossSum l_gpu = on_gpu->forward_backward(mb_gpu, up(tokens), up(targets), scale);
  gpu().stream().synchronize();

  const bool low = mode == Mode::Bf16;
  EXPECT_EQ(l_gpu.count, l_cpu.count);
  EXPECT_NEAR(l_gpu.sum / l_gpu.count, l_cpu.sum / l_cpu.count, low ? 2e-2 : 1e-4);
  std::map<std::string, const Parameter*> gpu_params;
  for (const Parameter* p : on_gpu->parameters()) gpu_params[p->name] = p;
  int compared = 0;
  for (const Parameter* p : on_cpu->parameters()) {
    if (!p->has_grad()) continue;
    ASSERT_TRUE(gpu_params.count(p->name)) << p->name;
    const Parameter* g = gpu_params[p->name];
    ASSERT_TRUE(g->has_grad()) << p->name;
    EXPECT_TRUE(close(g->grad_if_any(), p->grad_if_any(), low ? 3e-3 : 2e-5, low ? 5e-2 : 2e-3))
        << p->name;
    ++compared;
  }
  EXPECT_GT(compared, 4);
}

INSTANTIATE_TEST_SUITE_P(FamiliesAndModes, GpuStep,
                         ::testing::Combine(::testing::Values("gpt2", "llama", "llama_window"),
                                            ::testing::Values(Mode::Plain, Mode::Selective,
                                                              Mode::Full, Mode::Lora, Mode::Bf16)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" +
                                  mode_name(std::get<1>(info.param));
                         });

}  // namespace
}  // namespace braid::gpu_test
