// adamw_update (core/kernels/optimizer.h) bit for bit against the update written out as a
// serial float loop in the documented order, so the per-element arithmetic shared with the CUDA
// kernel (core/kernels/math/adamw.h) cannot drift from it.
#include <gtest/gtest.h>

#include <cmath>

#include "core/kernels/elementwise.h"
#include "core/kernels/optimizer.h"
#include "kernel_test_util.h"

namespace braid {
namespace {

TEST(KernelsOptimizer, AdamWMatchesTheSerialFormulaBitForBit) {
  const int64_t n = 1001;
  Tensor w = kernel_test::random_tensor({n}, 1),
         m = kernel_test::random_tensor({n}, 2, -1e-2, 1e-2);
  Tensor v = kernel_test::random_tensor({n}, 3, 0.0, 1e-3);
  Tensor w2 = w.clone(), m2 = m.clone(), v2 = v.clone();
  for (int step = 1; step <= 3; ++step) {
    Tensor g = kernel_test::random_tensor({n}, 10 + static_cast<uint64_t>(step), -2.0, 2.0);
    const float b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, lr = 3e-4f;
    const AdamWStep s{b1,
                      b2,
                      eps,
                      lr / (1.0f - std::pow(b1, static_cast<float>(step))),
                      1.0f / std::sqrt(1.0f - std::pow(b2, static_cast<float>(step))),
                      step == 2 ? 0.0f : lr * 0.1f};
    adamw_update(test_ctx(), w, m, v, g, s);
    for (int64_t i = 0; i < n; ++i) {
      float& wi = w2.f32()[i];
      float& mi = m2.f32()[i];
      float& vi = v2.f32()[i];
      const float gi = g.f32()[i];
      mi = b1 * mi + (1.0f - b1) * gi;
      vi = b2 * vi + (1.0f - b2) * gi * gi;
      const float denom = std::sqrt(vi) * s.inv_sqrt_bc2 + eps;
      wi -= s.step_size * mi / denom + s.decay * wi;
    }
    EXPECT_TRUE(kernel_test::bitwise_equal(w, w2)) << "w, step " << step;
    EXPECT_TRUE(kernel_test::bitwise_equal(m, m2)) << "m, step " << step;
    EXPECT_TRUE(kernel_test::bitwise_equal(v, v2)) << "v, step " << step;
  }
}

// The rounded copy written inside the update: the same w, m and v bits as the update without
// it, and the bits cast() gives from the new w, at every instruction-set level (each level's
// conversion path) for bf16 and f16; n leaves a partial block and a partial vector.
class AdamWRounded : public kernel_test::AtCpuIsa {};

TEST_P(AdamWRounded, WritesTheCastOfTheNewWeights) {
  const int64_t n = 2 * 2048 + 37;
  for (DType low : {DType::BF16, DType::F16}) {
    Tensor w = kernel_test::random_tensor({n}, 1),
           m = kernel_test::random_tensor({n}, 2, -1e-2, 1e-2);
    Tensor v = kernel_test::random_tensor({n}, 3, 0.0, 1e-3);
    Tensor w2 = w.clone(), m2 = m.clone(), v2 = v.clone();
    Tensor rounded = Tensor::zeros({n}, low), expect = Tensor::zeros({n}, low);
    for (int step = 1; step <= 2; ++step) {
      const Tensor g = kernel_test::random_tensor({n}, 20 + static_cast<uint64_t>(step), -2.0, 2.0);
      const AdamWStep s{0.9f, 0.95f, 1e-8f, 3e-3f, 1.1f, 3e-5f, 0.75f};
      adamw_update(ctx(), w, m, v, g, s, &rounded);
      adamw_update(ctx(), w2, m2, v2, g, s);
      cast(ctx(), expect, w2);
      EXPECT_TRUE(kernel_test::bitwise_equal(w, w2)) << dtype_name(low) << " w, step " << step;
      EXPECT_TRUE(kernel_test::bitwise_equal(m, m2)) << dtype_name(low) << " m, step " << step;
      EXPECT_TRUE(kernel_test::bitwise_equal(v, v2)) << dtype_name(low) << " v, step " << step;
      EXPECT_TRUE(kernel_test::bitwise_equal(rounded, expect))
          << dtype_name(low) << " rounded, step " << step;
    }
  }
  Tensor w = kernel_test::random_tensor({8}, 1), m = w.clone(), v = w.clone();
  Tensor wrong = Tensor::zeros({7}, DType::BF16);
  EXPECT_THROW(
      adamw_update(ctx(), w, m, v, w, AdamWStep{0.9f, 0.95f, 1e-8f, 1e-3f, 1.0f, 0.0f}, &wrong),
      std::exception);
}

INSTANTIATE_TEST_SUITE_P(Levels, AdamWRounded, ::testing::ValuesIn(kAllCpuIsas),
                         kernel_test::cpu_isa_test_name);

}  // namespace
}  // namespace braid
