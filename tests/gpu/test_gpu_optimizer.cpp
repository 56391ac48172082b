// CUDA AdamW against its CPU twin, bit for bit: both run core/kernels/math/adamw.h with every
// product and sum rounded on its own. Odd sizes, several steps, with and without weight decay.
// 8-bit AdamW the same way (core/kernels/math/adamw8bit.h): weights, codes and absmax.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "core/kernels/optimizer.h"
#include "tests/gpu/gpu_test_util.h"

namespace braid::gpu_test {
namespace {

class GpuOptimizer : public GpuTest {};

// AdamW's step `step` (bias corrections folded in; no weight decay on step 2).
AdamWStep step_at(int step) {
  const float b1 = 0.9f, b2 = 0.95f, lr = 3e-4f;
  return {b1,
          b2,
          1e-8f,
          lr / (1.0f - std::pow(b1, static_cast<float>(step))),
          1.0f / std::sqrt(1.0f - std::pow(b2, static_cast<float>(step))),
          step == 2 ? 0.0f : lr * 0.1f};
}

TEST_F(GpuOptimizer, AdamWMatchesCpuBitForBit) {
  for (int64_t n : {1, 17, 100003}) {
    const uint64_t s = static_cast<uint64_t>(n) * 10;
    Tensor w = random_host({n}, DType::F32, s),
           m = random_host({n}, DType::F32, s + 1, -1e-2f, 1e-2f);
    Tensor v = random_host({n}, DType::F32, s + 2, 0.0f, 1e-3f);
    Tensor gw = up(w), gm = up(m), gv = up(v);
    for (int step = 1; step <= 3; ++step) {
      Tensor g = random_host({n}, DType::F32, s + 10 + static_cast<uint64_t>(step), -2.0f, 2.0f);
      const AdamWStep st = step_at(step);
      adamw_update(cpu(), w, m, v, g, st);
      adamw_update(gpu(), gw, gm, gv, up(g), st);
      EXPECT_TRUE(close(gw, w, 0, 0)) << "w n=" << n << " step " << step;
      EXPECT_TRUE(close(gm, m, 0, 0)) << "m n=" << n << " step " << step;
      EXPECT_TRUE(close(gv, v, 0, 0)) << "v n=" << n << " step " << step;
    }
  }
}

// Mixed precision: the 16-bit copy of the updated f32 masters, and a clip factor on g.
TEST_F(GpuOptimizer, AdamWRoundedCopyAndGradScaleMatchCpuBitForBit) {
  const int64_t n = 4099;
  for (DType rdt : {DType::BF16, DType::F16}) {
    Tensor w = random_host({n}, DType::F32, 70),
           m = random_host({n}, DType::F32, 71, -1e-2f, 1e-2f);
    Tensor v = random_host({n}, DType::F32, 72, 0.0f, 1e-3f);
    Tensor g = random_host({n}, DType::F32, 73, -2.0f, 2.0f);
    Tensor gw = up(w), gm = up(m), gv = up(v);
    AdamWStep st = step_at(1);
    st.grad_scale = 0.37f;
    Tensor r = Tensor::empty({n}, rdt), gr = poisoned({n}, rdt);
    adamw_update(cpu(), w, m, v, g, st, &r);
    adamw_update(gpu(), gw, gm, gv, up(g), st, &gr);
    EXPECT_TRUE(close(gw, w, 0, 0)) << dtype_name(rdt);
    EXPECT_TRUE(close(gm, m, 0, 0)) << dtype_name(rdt);
    EXPECT_TRUE(close(gv, v, 0, 0)) << dtype_name(rdt);
    EXPECT_TRUE(same_bytes(gr, r)) << "the rounded copy, " << dtype_name(rdt);
  }
}

TEST_F(GpuOptimizer, Adamw8bitMatchesCpuBitForBit) {
  for (int64_t n : {1, 2047, 2 * 2048 + 333}) {
    const uint64_t s = static_cast<uint64_t>(n) * 10;
    const int64_t blocks = adamw8bit_blocks(n);
    Tensor w = random_host({n}, DType::F32, s);
    Tensor mq = Tensor::zeros({n}, DType::U8), vq = Tensor::zeros({n}, DType::U8);
    Tensor ma = Tensor::zeros({blocks}, DType::F32), va = Tensor::zeros({blocks}, DType::F32);
    Tensor gw = up(w), gmq = up(mq), gvq = up(vq), gma = up(ma), gva = up(va);
    for (int step = 1; step <= 3; ++step) {
      Tensor g = random_host({n}, DType::F32, s + 10 + static_cast<uint64_t>(step), -2.0f, 2.0f);
      const AdamWStep st = step_at(step);
      adamw8bit_update(cpu(), w, mq, ma, vq, va, g, st);
      adamw8bit_update(gpu(), gw, gmq, gma, gvq, gva, up(g), st);
      EXPECT_TRUE(close(gw, w, 0, 0)) << "w n=" << n << " step " << step;
      EXPECT_TRUE(same_bytes(gmq, mq)) << "m codes n=" << n << " step " << step;
      EXPECT_TRUE(same_bytes(gvq, vq)) << "v codes n=" << n << " step " << step;
      EXPECT_TRUE(close(gma, ma, 0, 0)) << "m absmax n=" << n << " step " << step;
      EXPECT_TRUE(close(gva, va, 0, 0)) << "v absmax n=" << n << " step " << step;
    }
  }
}

}  // namespace
}  // namespace braid::gpu_test
