// Whole-model tests: gradients vs finite differences for both families, KV-cache decoding
// equals the training forward, parameter names and counts.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/models/transformer.h"
#include "core/random.h"
#include "kernel_test_util.h"
#include "model_test_util.h"

namespace braid {
namespace {

using model_test::random_tokens;
using model_test::tiny;

class ModelGrad : public ::testing::TestWithParam<std::string> {};

TEST_P(ModelGrad, MatchesFiniteDifferences) {
  ModelConfig cfg = tiny(GetParam());
  Transformer model(test_ctx(), cfg);
  model.init_weights();
  // Norm weights and biases start at 1/0; perturb them so their gradients are generic.
  for (Parameter* p : model.parameters())
    if (p->value.ndim() == 1) fill_normal(p->value, 0.3f, 99, hash_string(p->name));
  const int64_t B = 2, T = 5;
  Tensor tokens = Tensor::empty({B, T}, DType::I32), targets = Tensor::empty({B, T}, DType::I32);
  random_tokens(tokens, cfg.vocab_size, 1);
  random_tokens(targets, cfg.vocab_size, 2);
  targets.i32()[3] = -1;  // an ignored position
  const int64_t counted = B * T - 1;

  model.zero_grad(test_ctx());
  MicroBatch mb(test_ctx());
  LossSum ls = model.forward_backward(mb, tokens, targets, 1.0f / counted);
  EXPECT_EQ(ls.count, counted);
  auto mean_loss = [&] {
    LossSum l = model.forward_loss(test_ctx(), tokens, targets);
    return l.sum / static_cast<double>(l.count);
  };
  EXPECT_NEAR(mean_loss(), ls.sum / counted, 1e-5);

  // Directional derivatives per parameter tensor: along the analytic gradient itself (any
  // error in it shows up as |g| != d/dt L(w + t g/|g|)) and along a random unit direction.
  // Whole-tensor directions give a far larger signal than single elements, so f32 noise in
  // the finite difference stays well below the tolerance even for small gradients.
  const double eps = 1e-2;
  int checked = 0;
  for (Parameter* p : model.parameters()) {
    const int64_t n = p->value.numel();
    std::vector<float> orig(p->value.f32(), p->value.f32() + n);
    std::vector<double> g(p->grad().f32(), p->grad().f32() + n);
    double gnorm = 0;
    for (double v : g) gnorm += v * v;
    gnorm = std::sqrt(gnorm);
    ASSERT_GT(gnorm, 0.0) << p->name << " has a zero gradient";
    std::vector<double> rnd(n);
    double rnorm = 0;
    for (int64_t i = 0; i < n; ++i) {
      rnd[i] = uniform_at(5, hash_string(p->name), i) - 0.5;
      rnorm += rnd[i] * rnd[i];
    }
    for (int dir = 0; dir < 2; ++dir) {
      std::vector<double> u(n);
      for (int64_t i = 0; i < n; ++i) u[i] = dir == 0 ? g[i] / gnorm : rnd[i] / std::sqrt(rnorm);
      double an = 0;
      for (int64_t i = 0; i < n; ++i) an += g[i] * u[i];
      auto shifted_loss = [&](double t) {
        for (int64_t i = 0; i < n; ++i) p->value.f32()[i] = static_cast<float>(orig[i] + t * u[i]);
        return mean_loss();
      };
      const double fd = (shifted_loss(eps) - shifted_loss(-eps)) / (2 * eps);
      std::copy(orig.begin(), orig.end(), p->value.f32());
      EXPECT_NEAR(an, fd, 3e-5 + 2e-2 * std::fabs(fd))
          << p->name << (dir == 0 ? " along its gradient" : " along a random direction");
      ++checked;
    }
  }
  EXPECT_EQ(checked, 2 * static_cast<int>(model.parameters().size()));
}

INSTANTIATE_TEST_SUITE_P(Families, ModelGrad, ::testing::Values("gpt2", "llama"));

// zero_grad defers the zeroing and the linear layers' first contribution overwrites: a step
// over gradients full of NaN (left by a "previous step") gives, bit for bit, the gradients of a
// model whose buffers were really zeroed, for one micro-batch and for two accumulated ones, in
// f32 and bf16 storage. A gradient neither zeroed nor overwritten keeps its NaN and fails.
class ModelZeroGrad : public ::testing::TestWithParam<std::string> {};

TEST_P(ModelZeroGrad, DeferredZeroingGivesTheZeroedBuffersGradients) {
  for (DType dt : {DType::F32, DType::BF16}) {
    for (int micro_batches : {1, 2}) {
      ModelConfig cfg = tiny(GetParam());
      Transformer deferred(test_ctx(), cfg), zeroed(test_ctx(), cfg);
      deferred.init_weights();
      zeroed.init_weights();
      for (Transformer* m : {&deferred, &zeroed})
        for (Parameter* p : m->parameters())
          if (dt != DType::F32) p->value = p->value.to(dt);
      const int64_t B = 2, T = 5;
      auto step = [&](Transformer& m) {
        for (int k = 0; k < micro_batches; ++k) {
          MicroBatch mb(test_ctx());
          m.forward_backward(mb, model_test::tokens_of(B, T, cfg.vocab_size, 10 + k),
                             model_test::tokens_of(B, T, cfg.vocab_size, 20 + k), 0.1f);
        }
      };
      step(deferred);  // every gradient exists now
      for (Parameter* p : deferred.parameters()) p->grad().fill_(std::nanf(""));
      deferred.zero_grad(test_ctx());
      step(deferred);
      for (Parameter* p : zeroed.parameters()) p->grad().zero_();
      step(zeroed);
      const auto a = model_test::grads_of(deferred), b = model_test::grads_of(zeroed);
      ASSERT_EQ(a.size(), b.size());
      for (const auto& [name, g] : a) {
        ASSERT_EQ(g.size(), b.at(name).size());
        EXPECT_EQ(0, std::memcmp(g.data(), b.at(name).data(), g.size() * sizeof(float)))
            << name << ", " << dtype_name(dt) << ", " << micro_batches << " micro-batches";
      }
    }
  }
  // The parameter's side: a deferred zeroing reads as zero; an overwrite skips it.
  Parameter p("p", Tensor::zeros({3}));
  p.grad().fill_(2.0f);
  p.defer_zero_grad(test_ctx());
  bool overwrite = false;
  EXPECT_EQ(p.grad_for_overwrite(&overwrite).f32()[0], 2.0f);  // not zeroed: the caller writes
  EXPECT_TRUE(overwrite);
  EXPECT_EQ(p.grad_for_overwrite(&overwrite).f32()[0], 2.0f);
  EXPECT_FALSE(overwrite);  // the step's second contribution adds
  p.defer_zero_grad(test_ctx());
  EXPECT_EQ(p.grad_if_any().f32()[1], 0.0f);
  p.grad().fill_(2.0f);
  EXPECT_EQ(p.grad_for_overwrite(&overwrite).f32()[2], 2.0f);
  EXPECT_FALSE(overwrite);
}

INSTANTIATE_TEST_SUITE_P(Families, ModelZeroGrad, ::testing::Values("gpt2", "llama"));

class ModelDecode : public ::testing::TestWithParam<std::string> {};

// Feeding a sequence through the KV cache (a prompt chunk, then one token at a time) gives the
// same next-token losses as the training forward over the whole sequence.
TEST_P(ModelDecode, KvCacheMatchesFullForward) {
  ModelConfig cfg = tiny(GetParam());
  cfg.init_std = 0.2f;
  Transformer model(test_ctx(), cfg);
  model.init_weights();
  const int64_t T = 7;
  Tensor tokens = Tensor::empty({1, T}, DType::I32), targets = Tensor::empty({1, T}, DType::I32);
  random_tokens(tokens, cfg.vocab_size, 5);
  for (int64_t t = 0; t + 1 < T; ++t) targets.i32()[t] = tokens.i32()[t + 1];
  targets.i32()[T - 1] = -1;
  // Only the last position's logits come back from decode, so score prefix by prefix.
  KVCache cache = model.make_cache(test_ctx(), T);
  double sum = 0.0;
  const int64_t prompt = 3;
  Tensor logits =
      model.decode(test_ctx(), tokens.view({T}).slice0(0, prompt).view({1, prompt}), cache);
  for (int64_t t = prompt - 1; t + 1 < T; ++t) {
    if (t >= prompt)
      logits = model.decode(test_ctx(), tokens.view({T}).slice0(t, t + 1).view({1, 1}), cache);
    const float* z = logits.f32();
    double mx = z[0];
    for (int v = 1; v < cfg.vocab_size; ++v) mx = std::max(mx, static_cast<double>(z[v]));
    double se = 0;
    for (int v = 0; v < cfg.vocab_size; ++v) se += std::exp(z[v] - mx);
    sum += -(z[targets.i32()[t]] - mx - std::log(se));
  }
  // Same positions from the training forward.
  Tensor masked = targets.clone();
  for (int64_t t = 0; t < prompt - 1; ++t) masked.i32()[t] = -1;
  LossSum full = model.forward_loss(test_ctx(), tokens, masked);
  EXPECT_EQ(full.count, T - prompt);
  EXPECT_NEAR(sum, full.sum, 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Families, ModelDecode, ::testing::Values("gpt2", "llama"));

TEST(Model, ParameterNamesAndCounts) {
  ModelConfig g = tiny("gpt2");
  Transformer gm(test_ctx(), g);
  int64_t n = 0;
  for (Parameter* p : gm.parameters()) n += p->value.numel();
  EXPECT_EQ(n, g.num_params());
  EXPECT_NE(gm.find_parameter("transformer.h.1.attn.c_attn.weight"), nullptr);
  EXPECT_NE(gm.find_parameter("transformer.ln_f.bias"), nullptr);
  EXPECT_EQ(gm.find_parameter("lm_head.weight"), nullptr);  // tied
  EXPECT_EQ(gm.find_parameter("transformer.h.0.mlp.c_fc.weight")->value.shape(), (Shape{32, 8}));

  ModelConfig l = tiny("llama");
  Transformer lm(test_ctx(), l);
  n = 0;
  for (Parameter* p : lm.parameters()) n += p->value.numel();
  EXPECT_EQ(n, l.num_params());
  EXPECT_EQ(lm.find_parameter("model.layers.0.self_attn.k_proj.weight")->value.shape(),
            (Shape{4, 8}));
  EXPECT_NE(lm.find_parameter("lm_head.weight"), nullptr);
  EXPECT_NE(lm.find_parameter("model.norm.weight"), nullptr);
}

TEST(Model, InitIsSeededAndScaled) {
  ModelConfig g = tiny("gpt2");
  g.init_std = 0.02f;
  g.n_embd = 64;
  g.n_head = 4;
  Transformer a(test_ctx(), g), b(test_ctx(), g);
  a.init_weights();
  b.init_weights();
  for (size_t i = 0; i < a.parameters().size(); ++i)
    ASSERT_EQ(0, std::memcmp(a.parameters()[i]->value.raw(), b.parameters()[i]->value.raw(),
                             a.parameters()[i]->value.nbytes()));
  auto stddev = [](const Tensor& t) {
    double s = 0;
    for (int64_t i = 0; i < t.numel(); ++i) s += double(t.f32()[i]) * t.f32()[i];
    return std::sqrt(s / t.numel());
  };
  EXPECT_NEAR(stddev(a.find_parameter("transformer.h.0.mlp.c_fc.weight")->value), 0.02, 0.002);
  EXPECT_NEAR(stddev(a.find_parameter("transformer.h.0.mlp.c_proj.weight")->value), 0.02 / 2.0,
              0.001);
  EXPECT_EQ(a.find_parameter("transformer.h.0.ln_1.weight")->value.f32()[3], 1.0f);
  EXPECT_EQ(a.find_parameter("transformer.h.0.ln_1.bias")->value.f32()[3], 0.0f);
  g.seed = 8;
  Transformer c(test_ctx(), g);
  c.init_weights();
  EXPECT_NE(c.find_parameter("transformer.wte.weight")->value.f32()[0],
            a.find_parameter("transformer.wte.weight")->value.f32()[0]);
}

}  // namespace
}  // namespace braid
