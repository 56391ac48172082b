// braid plan formulas on small cases checked against values worked by hand.
#include <gtest/gtest.h>

#include "launch/plan/gpu_table.h"
#include "launch/plan/inference.h"
#include "launch/plan/memory_model.h"
#include "launch/plan/model_math.h"
#include "launch/plan/presets.h"
#include "launch/plan/time_model.h"
#include "plan_test_util.h"

namespace braid::plan {

namespace {
ModelConfig tiny() { return testing::tiny_gpt2(); }
}  // namespace

TEST(PlanFormulas, Gpt2SmallParamCount) {
  EXPECT_EQ(find_preset("gpt2-124m").num_params(), 124439808);
  // block = 12h^2 + 13h = 49,984; embeddings V*h + T*h = 10,240; ln_f 2h = 128.
  EXPECT_EQ(block_params(tiny()), 49984);
  EXPECT_EQ(tiny().num_params(), 2 * 49984 + 10240 + 128);
}

TEST(PlanFormulas, ActivationBytesPerLayerKorthikanti) {
  const ModelConfig m = tiny();
  TrainOptions t;
  t.flash_attention = false;  // keep the 5as/h term
  t.sequence_parallel = false;
  // s*b*h = 32*2*64 = 4096. No TP: 4096 * (34 + 5*4*32/64) = 4096 * 44.
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, t, 32, 2, 1), 4096.0 * 44);
  // TP 2 without SP: 4096 * (10 + 24/2 + 10/2) = 4096 * 27.
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, t, 32, 2, 2), 4096.0 * 27);
  // TP 2 with SP: 4096 * (34 + 10) / 2.
  t.sequence_parallel = true;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, t, 32, 2, 2), 4096.0 * 22);
  // Selective recompute drops the attention-score term: 4096 * 34 / 2.
  t.checkpointing = Checkpointing::Selective;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, t, 32, 2, 2), 4096.0 * 17);
  // Full recompute keeps only the 16-bit block input, sharded by SP: 2sbh/t.
  t.checkpointing = Checkpointing::Full;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, t, 32, 2, 2), 2.0 * 4096 / 2);
}

TEST(PlanFormulas, TinyConfigMemoryByCategory) {
  const ModelConfig m = tiny();  // 110,336 params
  TrainOptions t;                // bf16 compute, fp32 grads, AdamW
  t.global_batch = 8;
  t.micro_batch = 2;
  t.seq = 32;
  t.zero = 1;
  t.flash_attention = false;
  GpuSpec g = find_gpu("a100-80gb");
  g.overhead_gib = 0;
  const Layout l{2, 1, 1, 1, "1f1b"};  // 2 micro-batches per step
  const MemoryBreakdown mem = training_memory(m, t, l, g);
  EXPECT_DOUBLE_EQ(mem.weights, 110336.0 * 2);         // bf16 weights
  EXPECT_DOUBLE_EQ(mem.grads, 110336.0 * 4);           // fp32 gradients
  EXPECT_DOUBLE_EQ(mem.optimizer, 110336.0 * 12 / 2);  // (m, v, master) / dp
  // 2 layers x 1 in-flight micro-batch x 4096*44, + embedding output 64 tokens*2B*64,
  // + last stage: 64 tokens * (2*2*64 norm/head inputs + 4*128 fp32 logits).
  const double act = 2 * 4096.0 * 44 + 64 * 2 * 64 + 64 * (2 * 2 * 64 + 4 * 128);
  EXPECT_DOUBLE_EQ(mem.activations, act);
  EXPECT_DOUBLE_EQ(mem.comm, 2 * 25.0 * 1024 * 1024);  // two 25 MiB gradient buckets
  EXPECT_DOUBLE_EQ(mem.overhead, 0.05 * (act + mem.comm));
}

TEST(PlanFormulas, BubbleFraction) {
  EXPECT_DOUBLE_EQ(bubble_fraction(4, 8, 1), 3.0 / 8);
  EXPECT_DOUBLE_EQ(bubble_fraction(4, 8, 2), 3.0 / 16);
  EXPECT_DOUBLE_EQ(bubble_fraction(1, 8, 1), 0.0);
}

TEST(PlanFormulas, InflightMicrobatches) {
  EXPECT_DOUBLE_EQ(inflight_microbatches({1, 1, 4, 1, "1f1b"}, 8), 4.0);
  EXPECT_DOUBLE_EQ(inflight_microbatches({1, 1, 4, 1, "1f1b"}, 2), 2.0);
  EXPECT_DOUBLE_EQ(inflight_microbatches({1, 1, 4, 1, "gpipe"}, 8), 8.0);
  EXPECT_DOUBLE_EQ(inflight_microbatches({1, 1, 4, 2, "interleaved"}, 16), 4.0 + 3.0 / 2);
}

TEST(PlanFormulas, KvCacheBytes) {
  // Llama 2 70B: 2 * 80 layers * 8 kv heads * 128 dims * 2 bytes = 327,680 bytes per token.
  EXPECT_DOUBLE_EQ(kv_cache_bytes(find_preset("llama-70b"), 1, 1, 2.0), 327680.0);
  // OPT-13B shape (40 layers, h 5120): 819,200 bytes, the "800 KB per token" of the vLLM paper.
  ModelConfig opt = tiny();
  opt.n_layer = 40;
  opt.n_embd = 5120;
  opt.n_head = 40;
  EXPECT_DOUBLE_EQ(kv_cache_bytes(opt, 4096, 3, 2.0), 819200.0 * 4096 * 3);
}

TEST(PlanFormulas, LoraParamsAndFlops) {
  const ModelConfig m = find_preset("llama-7b");
  // q and v: 2 * r * (4096 + 4096) at r = 8.
  EXPECT_EQ(lora_params_per_block(m, 8, {"q", "v"}), 2 * 8 * 8192);
  EXPECT_THROW(lora_params_per_block(tiny(), 8, {"gate"}), UserError);
  TrainOptions t;
  // Full training: 6 FLOPs per matmul parameter + 12*h*s attention.
  EXPECT_DOUBLE_EQ(block_model_flops_per_token(m, t, 100),
                   6.0 * block_matmul_params(m) + 12.0 * 4096 * 100);
  t.checkpointing = Checkpointing::Full;
  EXPECT_DOUBLE_EQ(block_hw_flops_per_token(m, t, 100),
                   8.0 * block_matmul_params(m) + 16.0 * 4096 * 100);
}

TEST(PlanFormulas, RingAllreduce) {
  // 2 (n-1)/n * bytes / (bw * 0.8) + latency terms.
  const double s = ring_allreduce_s(1e9, 4, 100);
  EXPECT_NEAR(s, 1.5 * 1e9 / 80e9 + 6 * 10e-6, 1e-12);
  EXPECT_EQ(ring_allreduce_s(1e9, 1, 100), 0.0);
}

}  // namespace braid::plan
