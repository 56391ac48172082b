// The fp16 loss scaler's state machine and the f32 master weights of mixed precision (none
// for frozen parameters).
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "core/error.h"
#include "core/models/lora.h"
#include "kernel_test_util.h"
#include "launch/mixed_precision.h"
#include "model_test_util.h"
#include "optim/adamw.h"
#include "optim/loss_scaler.h"
#include "optim/master_weights.h"

namespace braid {
namespace {

LossScaleConfig scaler_config() {
  LossScaleConfig c;
  c.initial = 1024.0f;
  c.growth_factor = 2.0f;
  c.growth_interval = 3;
  c.backoff = 0.5f;
  c.hysteresis = 2;
  c.min_scale = 256.0f;
  c.max_skipped_steps = 4;
  return c;
}

TEST(LossScaler, HysteresisBackoffGrowthAndFloor) {
  LossScaler s(scaler_config());
  // The first overflow is skipped but, with hysteresis 2, does not back off yet.
  LossScaleUpdate u = s.update(true);
  EXPECT_TRUE(u.skip);
  EXPECT_FALSE(u.backed_off);
  EXPECT_EQ(s.scale(), 1024.0f);
  u = s.update(true);  // the second one does
  EXPECT_TRUE(u.skip && u.backed_off);
  EXPECT_EQ(s.scale(), 512.0f);
  EXPECT_EQ(s.skipped_in_a_row(), 2);
  // Good steps reset the run of skips; after growth_interval of them the scale doubles.
  EXPECT_FALSE(s.update(false).skip);
  EXPECT_EQ(s.skipped_in_a_row(), 0);
  EXPECT_FALSE(s.update(false).grew);
  EXPECT_TRUE(s.update(false).grew);
  EXPECT_EQ(s.scale(), 1024.0f);
  // Backing off stops at min_scale.
  for (int i = 0; i < 3; ++i) s.update(true);
  EXPECT_EQ(s.scale(), 512.0f);
  EXPECT_EQ(s.skipped_total(), 5);
  LossScaleConfig c = scaler_config();
  c.hysteresis = 1;
  c.max_skipped_steps = 100;
  LossScaler f(c);
  for (int i = 0; i < 10; ++i) f.update(true);
  EXPECT_EQ(f.scale(), 256.0f);
}

TEST(LossScaler, TooManySkipsInARowStopWithAClearMessage) {
  LossScaler s(scaler_config());
  for (int i = 0; i < 3; ++i) s.update(true);
  try {
    s.update(true);
    ADD_FAILURE() << "the 4th skip in a row must stop the run";
  } catch (const UserError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("skipped 4 steps in a row"), std::string::npos) << m;
    EXPECT_NE(m.find("train.precision=bf16"), std::string::npos) << m;
  }
}

TEST(LossScaler, StateRoundTripsAndConfigIsValidated) {
  LossScaler a(scaler_config());
  a.update(true);
  a.update(false);
  LossScaler b(scaler_config());
  b.restore(a.state());
  for (bool o : {true, true, false, false, false}) {
    const LossScaleUpdate ua = a.update(o), ub = b.update(o);
    EXPECT_EQ(ua.new_scale, ub.new_scale);
  }
  LossScaleConfig bad = scaler_config();
  bad.backoff = 1.5f;
  EXPECT_THROW(bad.validate(), ConfigError);
  bad = scaler_config();
  bad.hysteresis = 0;
  EXPECT_THROW(bad.validate(), ConfigError);
}

TEST(MasterWeights, KeepF32MastersAndRefreshLowPrecisionCopies) {
  ExecContext ctx;
  Parameter w("w", kernel_test::random_tensor({4, 16}, 1).clone(MemCategory::Weights));
  Parameter frozen("f", kernel_test::random_tensor({16}, 2).clone(MemCategory::Weights), false);
  const Tensor w0 = w.value.clone(), f0 = frozen.value.clone();
  MasterWeights mw(ctx, {&w, &frozen}, DType::BF16);
  EXPECT_EQ(w.value.dtype(), DType::BF16);
  EXPECT_EQ(frozen.value.dtype(), DType::BF16);
  EXPECT_TRUE(kernel_test::bitwise_equal(frozen.value, f0.to(DType::BF16)));
  // A master for the trainable parameter only: 4 x 16 f32 = 256 bytes (a multiple of the
  // allocator's 64-byte rounding, so the count is exact).
  EXPECT_EQ(ctx.allocator().stats().live_bytes[static_cast<int>(MemCategory::MasterWeights)],
            4 * 16 * 4);
  std::vector<Parameter*> masters = mw.params();
  ASSERT_EQ(masters.size(), 1u);
  EXPECT_TRUE(kernel_test::bitwise_equal(masters[0]->value, w0));  // the master is exact
  EXPECT_TRUE(kernel_test::bitwise_equal(w.value, w0.to(DType::BF16)));
  // The gradient is shared: the model's f32 gradient is what the master's optimizer reads.
  EXPECT_EQ(w.grad().dtype(), DType::F32);
  w.grad().fill_(0.5f);
  OptimConfig oc;
  oc.weight_decay = 0.0f;
  AdamW opt(ctx, masters, oc);
  mw.step(opt, 0.01f);
  // Adam's first step moves every weight by lr (sign of the gradient) in f32 on the master;
  // the bf16 copy is the rounded master.
  const float* m = masters[0]->value.f32();
  for (int64_t i = 0; i < w0.numel(); ++i) EXPECT_NEAR(m[i], w0.f32()[i] - 0.01f, 1e-6f);
  EXPECT_TRUE(kernel_test::bitwise_equal(w.value, masters[0]->value.to(DType::BF16)));
  // Checkpoints get both: the master, and the frozen value widened (exactly) to f32.
  const auto named = mw.named_masters();
  ASSERT_EQ(named.size(), 2u);
  EXPECT_EQ(named[1].first, "f");
  EXPECT_EQ(named[1].second.dtype(), DType::F32);
  EXPECT_TRUE(kernel_test::bitwise_equal(named[1].second, f0.to(DType::BF16).to(DType::F32)));
  // Loading rounds the frozen value once and refreshes the trainable copy from its master.
  std::map<std::string, Tensor> file = {{"w", w0}, {"f", f0}};
  mw.load([&](const std::string& n) { return file.at(n); });
  EXPECT_TRUE(kernel_test::bitwise_equal(masters[0]->value, w0));
  EXPECT_TRUE(kernel_test::bitwise_equal(w.value, w0.to(DType::BF16)));
  EXPECT_TRUE(kernel_test::bitwise_equal(frozen.value, f0.to(DType::BF16)));
}

// LoRA + bf16: only the adapters get f32 masters (and moments); the frozen base is bf16 alone.
TEST(MixedPrecision, LoraBaseGetsNoMasterNorOptimizerState) {
  ExecContext ctx;  // its own allocator: the counts below start at zero
  Transformer model(ctx, model_test::tiny("gpt2", 2));
  model.init_weights();
  LoraConfig lc;
  lc.rank = 2;
  lc.alpha = 4.0f;
  lc.targets = {"all-linear"};
  ASSERT_GT(apply_lora(model, lc, 1), 0);
  TrainConfig tc;
  tc.precision = Precision::BF16;
  MixedPrecision mp(ctx, model.parameters(), tc);
  AdamW opt(ctx, mp.optimizer_params(), OptimConfig{});
  int64_t trainable_bytes = 0, frozen = 0;
  for (Parameter* p : model.parameters()) {
    EXPECT_EQ(p->value.dtype(), DType::BF16) << p->name;
    if (!p->trainable) {
      ++frozen;
      continue;
    }
    const int64_t bytes = p->value.numel() * 4;
    // Every adapter of this model is a multiple of 64 bytes in f32, the allocator's rounding
    // below 4 KiB, so the live byte count is exact.
    ASSERT_EQ(bytes % 64, 0) << p->name;
    trainable_bytes += bytes;
  }
  ASSERT_GT(frozen, 0);
  const MemoryStats s = ctx.allocator().stats();
  EXPECT_EQ(s.live_bytes[static_cast<int>(MemCategory::MasterWeights)], trainable_bytes);
  EXPECT_EQ(s.live_bytes[static_cast<int>(MemCategory::OptimizerState)], 2 * trainable_bytes);
  EXPECT_EQ(mp.optimizer_params().size(),
            static_cast<size_t>(std::ssize(model.parameters()) - frozen));
  // The checkpoint still names every parameter (frozen ones widened from bf16).
  EXPECT_EQ(mp.checkpoint_weights().size(), model.parameters().size());
}

}  // namespace
}  // namespace braid
