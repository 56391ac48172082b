// Fused LM-head cross-entropy vs a double-precision reference: losses, dx, dw accumulation,
// ignored rows, forward-only path, bad targets.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/kernels/cross_entropy.h"
#include "kernel_test_util.h"

namespace braid {
namespace {

using kernel_test::expect_close;

std::vector<float> random_values(int64_t n, uint32_t seed, float amp) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-amp, amp);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(gen);
  return v;
}

struct Problem {
  int64_t N, C, V;
  std::vector<float> x, w;       // x: (N, C); w: (V, C)
  std::vector<int32_t> targets;  // (N)
  float grad_scale;
};

Problem make_problem(int64_t N, int64_t C, int64_t V, uint32_t seed, float amp = 1.0f) {
  Problem p{N,  C,    V, random_values(N * C, seed, amp), random_values(V * C, seed + 1, amp),
            {}, 0.37f};
  std::mt19937 gen(seed + 2);
  for (int64_t i = 0; i < N; ++i)
    p.targets.push_back(i % 4 == 1 ? -1 : static_cast<int32_t>(gen() % static_cast<uint32_t>(V)));
  return p;
}

struct Ref {
  std::vector<double> losses, dx, dw;
};

Ref reference(const Problem& p) {
  Ref r{std::vector<double>(p.N, 0.0), std::vector<double>(p.N * p.C, 0.0),
        std::vector<double>(p.V * p.C, 0.0)};
  std::vector<double> logits(p.V);
  for (int64_t i = 0; i < p.N; ++i) {
    if (p.targets[i] < 0) continue;
    double m = -1e300;
    for (int64_t v = 0; v < p.V; ++v) {
      double s = 0;
      for (int64_t c = 0; c < p.C; ++c) s += double(p.x[i * p.C + c]) * p.w[v * p.C + c];
      logits[v] = s;
      m = std::max(m, s);
    }
    double sum = 0;
    for (double l : logits) sum += std::exp(l - m);
    const double lse = m + std::log(sum);
    r.losses[i] = lse - logits[p.targets[i]];
    for (int64_t v = 0; v < p.V; ++v) {
      const double g = p.grad_scale * (std::exp(logits[v] - lse) - (v == p.targets[i] ? 1 : 0));
      for (int64_t c = 0; c < p.C; ++c) {
        r.dx[i * p.C + c] += g * p.w[v * p.C + c];
        r.dw[v * p.C + c] += g * p.x[i * p.C + c];
      }
    }
  }
  return r;
}

std::vector<float> dw_prefill(const Problem& p) { return random_values(p.V * p.C, 99, 2.0f); }

// Runs forward + backward with dw pre-filled and dx full of NaN; checks all three outputs.
void check_full(ExecContext& ctx, const Problem& p, double atol) {
  Tensor x = Tensor::from_vector(p.x, {p.N, p.C}), w = Tensor::from_vector(p.w, {p.V, p.C});
  Tensor targets = Tensor::from_vector_i32(p.targets, {p.N});
  Tensor losses = Tensor::empty({p.N}), dx = Tensor::empty({p.N, p.C});
  losses.fill_(NAN);
  dx.fill_(NAN);  // dx is overwritten, so garbage must not leak through
  const std::vector<float> pre = dw_prefill(p);
  Tensor dw = Tensor::from_vector(pre, {p.V, p.C});
  lm_head_cross_entropy(ctx, losses, dx, dw, x, w, targets, p.grad_scale);

  Ref r = reference(p);
  for (size_t i = 0; i < pre.size(); ++i) r.dw[i] += pre[i];  // dw accumulates
  expect_close(losses, r.losses, atol, 1e-5, "losses");
  expect_close(dx, r.dx, atol, 1e-4, "dx");
  expect_close(dw, r.dw, atol, 1e-4, "dw");
}

// At every instruction-set level this CPU has (the softmax rows are AVX2 from Avx2 up, scalar
// below); the levels it lacks skip, naming the feature.
class KernelsCrossEntropyAt : public kernel_test::AtCpuIsa {};

TEST_P(KernelsCrossEntropyAt, MatchesReferenceWithIgnoredRowsAndOddVocab) {
  check_full(ctx(), make_problem(9, 5, 11, 1), 1e-5);
}

TEST_P(KernelsCrossEntropyAt, MatchesReferenceAcrossChunks) {
  // 600 rows with a tiny vocabulary span two row chunks.
  check_full(ctx(), make_problem(600, 7, 16, 2), 2e-5);
}

TEST_P(KernelsCrossEntropyAt, StableForLargeLogits) {
  // Logits in the hundreds: a naive exp would overflow.
  Problem p = make_problem(6, 8, 13, 3, 6.0f);
  check_full(ctx(), p, 2e-3);
}

INSTANTIATE_TEST_SUITE_P(KernelsCrossEntropy, KernelsCrossEntropyAt,
                         ::testing::ValuesIn(kAllCpuIsas), kernel_test::cpu_isa_test_name);

TEST(KernelsCrossEntropy, ForwardOnlyLeavesDwUntouched) {
  const Problem p = make_problem(10, 6, 11, 4);
  Tensor x = Tensor::from_vector(p.x, {p.N, p.C}), w = Tensor::from_vector(p.w, {p.V, p.C});
  Tensor targets = Tensor::from_vector_i32(p.targets, {p.N});
  Tensor losses = Tensor::empty({p.N}), dx;
  const std::vector<float> pre = dw_prefill(p);
  Tensor dw = Tensor::from_vector(pre, {p.V, p.C});
  lm_head_cross_entropy(test_ctx(), losses, dx, dw, x, w, targets, p.grad_scale);
  expect_close(losses, reference(p).losses, 1e-5, 1e-5, "losses");
  for (size_t i = 0; i < pre.size(); ++i) ASSERT_EQ(dw.f32()[i], pre[i]) << i;
  for (int64_t i = 0; i < p.N; ++i) {
    if (p.targets[i] < 0) {
      EXPECT_EQ(losses.f32()[i], 0.0f) << i;
    }
  }
}

TEST(KernelsCrossEntropy, DxMatchesFiniteDifferencesOfTheLoss) {
  // Guards the reference's gradient formula: d(grad_scale * sum(losses)) / dx.
  const Problem p = make_problem(3, 4, 7, 5);
  Tensor x = Tensor::from_vector(p.x, {p.N, p.C}), w = Tensor::from_vector(p.w, {p.V, p.C});
  Tensor targets = Tensor::from_vector_i32(p.targets, {p.N});
  Tensor losses = Tensor::empty({p.N}), dx = Tensor::empty({p.N, p.C}),
         dw = Tensor::zeros({p.V, p.C});
  lm_head_cross_entropy(test_ctx(), losses, dx, dw, x, w, targets, p.grad_scale);
  auto total = [&](const Problem& q) {
    double s = 0;
    for (double l : reference(q).losses) s += l;
    return p.grad_scale * s;
  };
  for (size_t i = 0; i < p.x.size(); ++i) {
    Problem plus = p, minus = p;
    plus.x[i] += 1e-2f;
    minus.x[i] -= 1e-2f;
    const double fd = (total(plus) - total(minus)) / (double(plus.x[i]) - double(minus.x[i]));
    EXPECT_NEAR(dx.f32()[i], fd, 1e-4) << i;
  }
}

TEST(KernelsCrossEntropy, RejectsTargetsOutsideVocabulary) {
  const Problem p = make_problem(4, 3, 11, 6);
  Tensor x = Tensor::from_vector(p.x, {p.N, p.C}), w = Tensor::from_vector(p.w, {p.V, p.C});
  Tensor losses = Tensor::empty({p.N}), dx = Tensor::empty({p.N, p.C});
  const std::vector<float> pre = dw_prefill(p);
  Tensor dw = Tensor::from_vector(pre, {p.V, p.C});
  for (int32_t bad : {11, -2}) {
    Tensor targets = Tensor::from_vector_i32({0, 3, bad, 1}, {p.N});
    try {
      lm_head_cross_entropy(test_ctx(), losses, dx, dw, x, w, targets, 1.0f);
      ADD_FAILURE() << "target " << bad << " was accepted";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("= " + std::to_string(bad)), std::string::npos) << msg;
      EXPECT_NE(msg.find("V = 11"), std::string::npos) << msg;
    }
  }
  for (size_t i = 0; i < pre.size(); ++i) ASSERT_EQ(dw.f32()[i], pre[i]) << i;
}

// A frozen head (dw undefined): the same input gradient and losses, no weight gradient.
TEST(KernelsCrossEntropy, FrozenHeadGivesTheSameInputGradient) {
  const int64_t N = 37, C = 9, V = 23;
  Tensor x = kernel_test::random_tensor({N, C}, 71), w = kernel_test::random_tensor({V, C}, 72);
  std::vector<int32_t> tv(N);
  for (int64_t i = 0; i < N; ++i) tv[i] = static_cast<int32_t>((i * 7) % V);
  Tensor targets = Tensor::from_vector_i32(tv, {N});
  Tensor l1 = Tensor::empty({N}), l2 = Tensor::empty({N});
  Tensor dx1 = Tensor::empty({N, C}), dx2 = Tensor::empty({N, C}), dw = Tensor::zeros({V, C}), none;
  lm_head_cross_entropy(test_ctx(), l1, dx1, dw, x, w, targets, 0.5f);
  lm_head_cross_entropy(test_ctx(), l2, dx2, none, x, w, targets, 0.5f);
  EXPECT_TRUE(kernel_test::bitwise_equal(dx1, dx2));
  EXPECT_TRUE(kernel_test::bitwise_equal(l1, l2));
}

TEST(KernelsCrossEntropy, RejectsBadShapesAndDtypes) {
  Tensor x = Tensor::zeros({4, 3}), w = Tensor::zeros({11, 3}), losses = Tensor::zeros({4});
  Tensor targets = Tensor::from_vector_i32({0, 1, 2, 3}, {4});
  Tensor dx = Tensor::zeros({4, 3}), dw = Tensor::zeros({11, 3}), none;
  Tensor bad_w = Tensor::zeros({11, 4});
  EXPECT_THROW(lm_head_cross_entropy(test_ctx(), losses, dx, dw, x, bad_w, targets, 1.0f), Error);
  Tensor float_targets = Tensor::zeros({4});
  EXPECT_THROW(lm_head_cross_entropy(test_ctx(), losses, dx, dw, x, w, float_targets, 1.0f), Error);
  Tensor bad_dw = Tensor::zeros({10, 3});
  EXPECT_THROW(lm_head_cross_entropy(test_ctx(), losses, dx, bad_dw, x, w, targets, 1.0f), Error);
  Tensor short_losses = Tensor::zeros({3});
  EXPECT_THROW(lm_head_cross_entropy(test_ctx(), short_losses, none, none, x, w, targets, 1.0f),
               Error);
}

}  // namespace
}  // namespace braid
