// CUDA AdamW against its CPU twin, bit for bit: both run core/kernels/math/adamw.h with every
// product and sum rounded on its own. Odd sizes, several steps, with and without weight decay.
#include <gtest/gtest.h>

#include <cmath>

#include "core/kernels/optimizer.h"
#include "tests/gpu/gpu_test_util.h"

namespace braid::gpu_test {
namespace {

class GpuOptimizer : public GpuTest {};

TEST_F(GpuOptimizer, AdamWMatchesCpuBitForBit) {
  for (int64_t n : {1, 17, 100003}) {
    const uint64_t s = static_cast<uint64_t>(n) * 10;
    Tensor w = random_host({n}, DType::F32, s),
           m = random_host({n}, DType::F32, s + 1, -1e-2f, 1e-2f);
    Tensor v = random_host({n}, DType::F32, s + 2, 0.0f, 1e-3f);
    Tensor gw = up(w), gm = up(m), gv = up(v);
    for (int step = 1; step <= 3; ++step) {
      Tensor g = random_host({n}, DType::F32, s + 10 + static_cast<uint64_t>(step), -2.0f, 2.0f);
      const float b1 = 0.9f, b2 = 0.95f, lr = 3e-4f;
      AdamWStep st{b1,
                   b2,
                   1e-8f,
                   lr / (1.0f - std::pow(b1, static_cast<float>(step))),
                   1.0f / std::sqrt(1.0f - std::pow(b2, static_cast<float>(step))),
                   step == 2 ? 0.0f : lr * 0.1f};
      adamw_update(cpu(), w, m, v, g, st);
      adamw_update(gpu(), gw, gm, gv, up(g), st);
      EXPECT_TRUE(close(gw, w, 0, 0)) << "w n=" << n << " step " << step;
      EXPECT_TRUE(close(gm, m, 0, 0)) << "m n=" << n << " step " << step;
      EXPECT_TRUE(close(gv, v, 0, 0)) << "v n=" << n << " step " << step;
    }
  }
}

}  // namespace
}  // namespace braid::gpu_test
