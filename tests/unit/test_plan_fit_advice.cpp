// Fine-tuning answers: fits or not, and what to change (fit_advice.h), each change re-predicted.
#include <gtest/gtest.h>

#include <string>

#include "launch/plan/fit_advice.h"
#include "launch/plan/gpu_table.h"
#include "launch/plan/presets.h"
#include "launch/plan/time_model.h"

namespace braid::plan {

namespace {

Cluster one(const char* gpu) {
  Cluster c;
  c.gpu = find_gpu(gpu);
  c.gpus_per_node = 1;
  c.intra_bw_gbs = c.gpu.intra_bw_gbs;
  c.inter_bw_gbs = c.gpu.inter_bw_gbs;
  return c;
}

TrainOptions lora(int micro_batch, int seq, const char* base) {
  TrainOptions t;
  t.global_batch = 16;
  t.micro_batch = micro_batch;
  t.seq = seq;
  t.lora_rank = 16;
  t.lora_base = base;
  return t;
}

const Layout kOne{1, 1, 1, 1, "1f1b"};

bool has(const std::vector<FitChange>& v, const std::string& what) {
  for (const FitChange& f : v)
    if (f.what == what) return true;
  return false;
}

}  // namespace

// A plan that fits names the largest micro-batch that still would: one more does not fit (or
// does not divide the batch).
TEST(PlanFitAdvice, FittingPlanNamesTheLargestMicroBatch) {
  const ModelConfig m = find_preset("llama3-8b");
  const Cluster c = one("a100-80gb");
  const TrainOptions t = lora(1, 2048, "bf16");
  ASSERT_TRUE(predict(m, t, kOne, c).fits);
  const FitAdvice a = fit_advice(m, t, kOne, c);
  EXPECT_TRUE(a.single.empty());
  ASSERT_GT(a.largest_micro_batch, 1);
  TrainOptions big = t;
  big.micro_batch = a.largest_micro_batch;
  EXPECT_TRUE(predict(m, big, kOne, c).fits);
  for (int b = a.largest_micro_batch + 1; b <= 16; ++b) {
    big.micro_batch = b;
    if (16 % b == 0) {
      EXPECT_FALSE(predict(m, big, kOne, c).fits) << b;
    }
  }
}

// Llama 2 7B LoRA on an RTX 3090 at micro-batch 8: too big; full recomputation and micro-batch 1
// each fit on their own, and every listed change really fits.
TEST(PlanFitAdvice, SingleChangesEachFit) {
  const ModelConfig m = find_preset("llama2-7b");
  const Cluster c = one("rtx-3090");
  const TrainOptions t = lora(8, 2048, "bf16");
  ASSERT_FALSE(predict(m, t, kOne, c).fits);
  const FitAdvice a = fit_advice(m, t, kOne, c);
  EXPECT_TRUE(has(a.single, "--checkpointing full"));
  EXPECT_TRUE(has(a.single, "--micro-batch 1"));
  EXPECT_FALSE(a.combined.has_value());
  for (const FitChange& f : a.single) {
    EXPECT_LE(f.total_bytes, c.gpu.memory_gib * 1024 * 1024 * 1024) << f.what;
    EXPECT_GT(f.tokens_per_s, 0) << f.what;
  }
  // The micro-batch named is the largest that fits: 2 does not.
  TrainOptions two = t;
  two.micro_batch = 2;
  EXPECT_FALSE(predict(m, two, kOne, c).fits);
}

// Llama 3 8B LoRA on an RTX 4090 at 4K tokens, micro-batch 4: no single change keeps the task
// (only a 256-token sequence fits alone), so the smallest combination is named too, without
// shortening the sequence.
TEST(PlanFitAdvice, CombinationWhenNoSingleChangeFits) {
  const ModelConfig m = find_preset("llama3-8b");
  const Cluster c = one("rtx-4090");
  const TrainOptions t = lora(4, 4096, "bf16");
  const FitAdvice a = fit_advice(m, t, kOne, c);
  ASSERT_TRUE(a.combined.has_value());
  EXPECT_EQ(a.combined->changes, 2) << a.combined->what;
  EXPECT_EQ(a.combined->what.find("--seq"), std::string::npos) << a.combined->what;
  EXPECT_LE(a.combined->total_bytes, c.gpu.memory_gib * 1024 * 1024 * 1024);
  for (const FitChange& f : a.single) EXPECT_NE(f.what.find("--seq"), std::string::npos) << f.what;
}

// QLoRA of Llama 3 70B does not fit one 24 GB card in any setting (its 4-bit weights alone are
// 36 GiB): the answer is more GPUs with the pipeline over them.
TEST(PlanFitAdvice, MoreGpusWhenNothingFitsOnOne) {
  const ModelConfig m = find_preset("llama3-70b");
  const Cluster c = one("rtx-4090");
  const TrainOptions t = lora(1, 2048, "4bit");
  const FitAdvice a = fit_advice(m, t, kOne, c);
  EXPECT_TRUE(a.single.empty());
  ASSERT_TRUE(a.combined.has_value());
  EXPECT_EQ(a.combined->what.rfind("--gpus-per-node 2 --pp 2", 0), 0u) << a.combined->what;
  // The same report lines as the CLI prints.
  const std::vector<std::string> hints = fit_hints(m, t, kOne, c);
  ASSERT_EQ(hints.size(), 1u);
  EXPECT_NE(hints[0].find("GiB per GPU"), std::string::npos) << hints[0];
}

// The consumer and data-centre cards users fine-tune on are all in the table, by either name.
TEST(PlanFitAdvice, FineTuningGpusAreKnown) {
  for (const char* name :
       {"rtx-3090", "rtx-4090", "rtx-5090", "a100-40", "a100-80", "h100", "h200", "l40s"})
    EXPECT_GT(find_gpu(name).memory_gib, 20) << name;
  EXPECT_NEAR(find_gpu("rtx-5090").memory_gib, 32607.0 / 1024, 1e-9);
  EXPECT_EQ(find_gpu("rtx-5090").name, "rtx5090");
}

}  // namespace braid::plan
