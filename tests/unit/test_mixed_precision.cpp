// The fp16 loss scaler's state machine, the f32 master weights of mixed precision (none for
// frozen parameters), and MixedPrecision as an Optimizer around AdamW: the same bits as masters
// and AdamW driven by hand, fp16 overflow skipping and unscaling, its checkpoint pieces.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "core/error.h"
#include "core/kernels/elementwise.h"
#include "core/models/lora.h"
#include "kernel_test_util.h"
#include "model_test_util.h"
#include "optim/adamw.h"
#include "optim/loss_scaler.h"
#include "optim/master_weights.h"
#include "optim/mixed_precision.h"

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
  // Checkpoints get both: the master, and the frozen value itself (no f32 copy on the
  // context's device; the model file widens it exactly as it is written).
  const auto named = mw.named_masters();
  ASSERT_EQ(named.size(), 2u);
  EXPECT_EQ(named[1].first, "f");
  EXPECT_TRUE(named[1].second.same_storage(frozen.value));
  EXPECT_TRUE(kernel_test::bitwise_equal(named[1].second, f0.to(DType::BF16)));
  // Loading rounds the frozen value once and refreshes the trainable copy from its master.
  std::map<std::string, Tensor> file = {{"w", w0}, {"f", f0}};
  mw.load([&](const std::string& n) { return file.at(n); });
  EXPECT_TRUE(kernel_test::bitwise_equal(masters[0]->value, w0));
  EXPECT_TRUE(kernel_test::bitwise_equal(w.value, w0.to(DType::BF16)));
  EXPECT_TRUE(kernel_test::bitwise_equal(frozen.value, f0.to(DType::BF16)));
}

// A LoRA base read straight in 16 bits (launch/train/model_passes.cpp read_base): a frozen
// parameter already in the compute dtype is taken as it is, no master and no copy; a trainable
// one must still come in f32.
TEST(MixedPrecision, FrozenParameterAlreadyInTheComputeDtypeIsTakenAsItIs) {
  ExecContext ctx;
  const Tensor f0 = kernel_test::random_tensor({16}, 5).to(DType::BF16);
  Parameter frozen("f", f0.clone(MemCategory::Weights), false);
  Parameter w("w", kernel_test::random_tensor({4, 4}, 6).clone(MemCategory::Weights));
  const Tensor before = frozen.value;
  MasterWeights mw(ctx, {&w, &frozen}, DType::BF16);
  EXPECT_TRUE(frozen.value.same_storage(before)) << "the frozen 16-bit value was copied";
  EXPECT_TRUE(kernel_test::bitwise_equal(frozen.value, f0));
  EXPECT_EQ(mw.params().size(), 1u);
  Parameter bad("t", f0.clone(MemCategory::Weights), true);  // trainable, not f32: no master
  EXPECT_THROW(MasterWeights(ctx, {&bad}, DType::BF16), Error);
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
  size_t given = 0;  // parameters make_inner was handed
  MixedPrecision mp(ctx, model.parameters(), DType::BF16, LossScaleConfig{},
                    [&](std::vector<Parameter*> masters) {
                      given = masters.size();
                      return std::make_unique<AdamW>(ctx, masters, OptimConfig{});
                    });
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
  EXPECT_EQ(given, static_cast<size_t>(std::ssize(model.parameters()) - frozen));
  EXPECT_EQ(mp.state_tensors(nullptr).size(), 2 * given);
  // The checkpoint still names every parameter (frozen ones widened from bf16).
  const std::optional<NamedTensors> w = mp.checkpoint_masters(true);
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(w->size(), model.parameters().size());
  EXPECT_FALSE(mp.scales_loss());  // bf16: no loss scale
  EXPECT_EQ(mp.loss_scale(), 1.0f);
}

// Two parameters with a fixed gradient, f32 values: for the wrapper and the reference.
struct TwoParams {
  Parameter a{"a.weight", kernel_test::random_tensor({8, 8}, 3).clone(MemCategory::Weights)};
  Parameter b{"b.bias", kernel_test::random_tensor({8}, 4).clone(MemCategory::Weights)};
  std::vector<Parameter*> ptrs() { return {&a, &b}; }
  void set_grads(int step, float scale) {
    for (Parameter* p : ptrs()) {
      p->grad().copy_from(
          kernel_test::random_tensor(p->value.shape(), 10 * step + p->value.ndim()));
      scale_inplace_host(p->grad(), scale);
    }
  }
  static void scale_inplace_host(Tensor& t, float s) {
    for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] *= s;
  }
};

std::unique_ptr<MixedPrecision> wrap(ExecContext& ctx, TwoParams& ps, DType dt,
                                     const LossScaleConfig& lc = {}) {
  return std::make_unique<MixedPrecision>(ctx, ps.ptrs(), dt, lc, [&](std::vector<Parameter*> m) {
    return std::make_unique<AdamW>(ctx, m, OptimConfig{});
  });
}

TEST(MixedPrecision, StepsLikeMastersAndAdamWByHand) {
  ExecContext ctx;
  TwoParams ps, ref;
  std::unique_ptr<MixedPrecision> mp = wrap(ctx, ps, DType::BF16);
  MasterWeights mw(ctx, ref.ptrs(), DType::BF16);
  AdamW ref_opt(ctx, mw.params(), OptimConfig{});
  for (int step = 1; step <= 3; ++step) {
    ps.set_grads(step, 1.0f);
    ref.set_grads(step, 1.0f);
    const double norm = mp->grad_norm();
    EXPECT_EQ(norm, global_grad_norm(ctx, mw.params()));
    EXPECT_FALSE(mp->skip_step(1.0, nullptr, step, [](const std::string&) {}));
    ASSERT_GT(norm, 0.5) << "the test must clip";
    const Tensor a_grad = ps.a.grad().clone();
    mp->clip(norm, 0.5f);  // kept for the update: the gradients are not rewritten
    EXPECT_TRUE(kernel_test::bitwise_equal(ps.a.grad(), a_grad));
    mp->step(1e-2f);
    clip_grad_norm(ctx, mw.params(), norm, 0.5f);
    mw.step(ref_opt, 1e-2f);
    EXPECT_TRUE(kernel_test::bitwise_equal(ps.a.value, ref.a.value)) << step;
    EXPECT_TRUE(kernel_test::bitwise_equal(ps.b.value, ref.b.value)) << step;
  }
  EXPECT_EQ(mp->steps_taken(), 3);
  EXPECT_EQ(mp->grads().size(), 2u);
}

TEST(MixedPrecision, Fp16SkipsOverflowsAndUnscalesTheRest) {
  ExecContext ctx;
  TwoParams ps;
  LossScaleConfig lc;
  lc.initial = 1024.0f;
  lc.hysteresis = 1;
  std::unique_ptr<MixedPrecision> mp = wrap(ctx, ps, DType::F16, lc);
  ASSERT_TRUE(mp->scales_loss());
  EXPECT_EQ(mp->loss_scale(), 1024.0f);
  std::vector<std::string> said;
  auto say = [&](const std::string& m) { said.push_back(m); };
  // A good step: the gradients and the norm lose the scale.
  ps.set_grads(1, 1024.0f);
  const Tensor a0 = ps.a.grad().clone();
  double norm = mp->grad_norm();
  const double scaled = norm;
  EXPECT_FALSE(mp->skip_step(2.5, &norm, 1, say));
  EXPECT_EQ(norm, scaled / 1024.0);
  for (int64_t i = 0; i < a0.numel(); ++i)
    EXPECT_EQ(ps.a.grad().f32()[i], a0.f32()[i] * (1.0f / 1024.0f));
  // An inf loss: skipped, the scale backs off, the gradients stay as they were.
  const Tensor a1 = ps.a.grad().clone();
  norm = 1.0;
  EXPECT_TRUE(mp->skip_step(INFINITY, &norm, 2, say));
  EXPECT_EQ(mp->loss_scale(), 512.0f);
  EXPECT_TRUE(kernel_test::bitwise_equal(ps.a.grad(), a1));
  ASSERT_EQ(said.size(), 1u);
  EXPECT_NE(said[0].find("step 2: fp16 overflow"), std::string::npos) << said[0];
  // The scaler's state survives a checkpoint.
  TwoParams ps2;
  std::unique_ptr<MixedPrecision> other = wrap(ctx, ps2, DType::F16, lc);
  other->restore_loss_scaler(mp->loss_scaler_state());
  EXPECT_EQ(other->loss_scale(), 512.0f);
  EXPECT_EQ(other->loss_scaler_state(), mp->loss_scaler_state());
}

TEST(MixedPrecision, RefusesConvertedParametersNoOptimizerKeeps) {
  ExecContext ctx;
  TwoParams ps;
  Tensor low = ctx.empty(ps.a.value.shape(), DType::BF16, MemCategory::Weights);
  cast(ctx, low, ps.a.value);
  ps.a.value = low;  // as if converted by a ZeroAdamW, but the inner one is a plain AdamW
  EXPECT_THROW(wrap(ctx, ps, DType::BF16), Error);
}

}  // namespace
}  // namespace braid
