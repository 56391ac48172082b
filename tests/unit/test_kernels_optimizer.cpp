// adamw_update (core/kernels/optimizer.h) bit for bit against the update written out as a
// serial float loop in the documented order, so the per-element arithmetic shared with the CUDA
// kernel (core/kernels/math/adamw.h) cannot drift from it.
#include <gtest/gtest.h>

#include <cmath>

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

}  // namespace
}  // namespace braid
