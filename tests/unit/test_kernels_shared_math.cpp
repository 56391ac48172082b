// The per-element math both backends compile (core/kernels/math/*.h), tested on the host: the
// CUDA kernels run these same functions, so these tests and the CPU kernel tests cover them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <set>

#include "core/kernels/math/activation.h"
#include "core/kernels/math/counter_rng.h"
#include "core/kernels/math/dropout.h"
#include "core/kernels/math/fast_exp.h"
#include "core/kernels/math/norms.h"
#include "core/kernels/math/rope.h"
#include "core/random.h"

namespace braid {
namespace {

TEST(KernelsSharedMath, ExpAndSigmoid) {
  for (float x = -87.0f; x <= 88.0f; x += 0.0173f)
    ASSERT_NEAR(math::exp_f32(x) / std::exp(static_cast<double>(x)), 1.0, 4e-7) << x;
  EXPECT_GT(math::exp_f32(-1000.0f), 0.0f);  // clamped: finite and nonzero
  EXPECT_TRUE(std::isfinite(math::exp_f32(1000.0f)));
  volatile float nan_in = NAN;
  EXPECT_TRUE(std::isnan(math::exp_f32(nan_in)));
  EXPECT_TRUE(std::isnan(math::sigmoid_f32(nan_in)));
  EXPECT_FLOAT_EQ(math::sigmoid_f32(0.0f), 0.5f);
  EXPECT_FLOAT_EQ(math::sigmoid_f32(100.0f), 1.0f);
  EXPECT_LT(math::sigmoid_f32(-100.0f), 1e-37f);
}

TEST(KernelsSharedMath, GeluAndSwigluMatchDoubleFormulas) {
  const double k = std::sqrt(2.0 / M_PI);
  auto gelu = [&](double x) { return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x))); };
  auto silu = [](double x) { return x / (1.0 + std::exp(-x)); };
  for (float x = -12.0f; x <= 12.0f; x += 0.0371f) {
    const double h = 1e-4;
    EXPECT_NEAR(math::gelu(x), gelu(x), 2e-6 + 2e-6 * std::fabs(gelu(x))) << x;
    const double dgelu = (gelu(x + h) - gelu(x - h)) / (2 * h);
    EXPECT_NEAR(math::gelu_grad(0.5f, x), 0.5 * dgelu, 1e-5) << x;
    const float u = 0.75f;
    EXPECT_NEAR(math::swiglu(x, u), silu(x) * u, 2e-6 + 2e-6 * std::fabs(silu(x))) << x;
    float dg = 0, du = 0;
    math::swiglu_grad(-1.5f, x, u, dg, du);
    const double dsilu = (silu(x + h) - silu(x - h)) / (2 * h);
    EXPECT_NEAR(dg, -1.5 * u * dsilu, 1e-5) << x;
    EXPECT_NEAR(du, -1.5 * silu(x), 2e-5 + 2e-6 * std::fabs(silu(x))) << x;
  }
}

TEST(KernelsSharedMath, NormFormulas) {
  EXPECT_FLOAT_EQ(math::norm_rstd(4.0f, 0.0f), 0.5f);
  EXPECT_FLOAT_EQ(math::norm_rstd(0.0f, 1e-6f), 1000.0f);
  EXPECT_FLOAT_EQ(math::layernorm_y(3.0f, 1.0f, 0.5f, 2.0f, -1.0f), 1.0f);  // (3-1)*.5*2-1
  EXPECT_FLOAT_EQ(math::rmsnorm_y(3.0f, 0.5f, 2.0f), 3.0f);
  // dx = rstd (dy w - mg - xhat mgx) and rstd (dy w - xhat mgx).
  EXPECT_FLOAT_EQ(math::layernorm_dx(2.0f, 3.0f, 0.5f, 2.0f, 1.0f, 4.0f), 6.0f);  // 2*(6-1-2)
  EXPECT_FLOAT_EQ(math::rmsnorm_dx(2.0f, 3.0f, 0.5f, 2.0f, 4.0f), 8.0f);          // 2*(6-2)
}

TEST(KernelsSharedMath, RopeFrequencyAndRotation) {
  EXPECT_EQ(math::rope_freq(0, 8, 10000.0), 1.0);
  EXPECT_DOUBLE_EQ(math::rope_freq(2, 8, 10000.0), 1.0 / 100.0);  // theta^(-4/8)
  EXPECT_DOUBLE_EQ(math::rope_freq(3, 64, 500000.0), std::pow(500000.0, -6.0 / 64.0));
  const double a = 0.7;
  const float c = static_cast<float>(std::cos(a)), s = static_cast<float>(std::sin(a));
  float x1 = 0, x2 = 0;
  math::rope_rotate_pair(1.0f, 2.0f, c, s, x1, x2);
  EXPECT_NEAR(x1, std::cos(a) - 2 * std::sin(a), 1e-6);
  EXPECT_NEAR(x2, 2 * std::cos(a) + std::sin(a), 1e-6);
  float y1 = 0, y2 = 0;  // the backward's negated sine undoes it
  math::rope_rotate_pair(x1, x2, c, -s, y1, y2);
  EXPECT_NEAR(y1, 1.0f, 1e-6);
  EXPECT_NEAR(y2, 2.0f, 1e-6);
}

TEST(KernelsSharedMath, CounterHashIsSplitMix64) {
  // SplitMix64's first outputs from state 0 (the reference generator's published values).
  EXPECT_EQ(math::mix64(0), 0xe220a8397b1dcdafull);
  EXPECT_EQ(math::mix64(0x9e3779b97f4a7c15ull), 0x6e789e6aa1b965f4ull);
  EXPECT_EQ(math::hash_combine(3, 5), math::mix64(3 ^ math::mix64(5)));
  EXPECT_EQ(math::unit_interval(0), 0.0);
  EXPECT_EQ(math::unit_interval(~0ull), 1.0 - 0x1.0p-53);
  EXPECT_EQ(uniform_at(1, 2, 3),
            math::unit_interval(math::hash_combine(math::hash_combine(1, 2), 3)));
}

TEST(KernelsSharedMath, DropoutRule) {
  // A window of columns [3, 7) of rows 10 wide: element (r, c) draws index r * 10 + 3 + c.
  EXPECT_EQ(math::dropout_index(0, 4, 10, 3), 3);
  EXPECT_EQ(math::dropout_index(5, 4, 10, 3), 14);
  EXPECT_EQ(math::dropout_index(5, 1, 0, 0), 5);  // the whole tensor
  const uint64_t base = math::hash_combine(42, 7);
  int64_t dropped = 0;
  std::set<float> kept;
  for (int64_t i = 0; i < 10000; ++i) {
    const float y = math::dropout_value(1.0f, base, i, 0.25f, 1.0f / 0.75f);
    const bool drop = uniform_at(42, 7, static_cast<uint64_t>(i)) < 0.25f;
    ASSERT_EQ(y == 0.0f, drop) << i;
    dropped += drop;
    if (!drop) kept.insert(y);
  }
  EXPECT_NEAR(dropped / 10000.0, 0.25, 0.02);
  EXPECT_EQ(kept, std::set<float>{1.0f / 0.75f});
  EXPECT_EQ(math::dropout_value(2.0f, base, 0, 0.0f, 1.0f), 2.0f);  // p = 0 keeps everything
}

}  // namespace
}  // namespace braid
