// CUDA rotary position embedding against its CPU twin: the same double-precision cos/sin table
// (core/kernels/math/rope.h), odd shapes, long positions, the scaled rope types (linear, llama3,
// yarn), every float dtype, and backward undoing forward. The op rotates x in place, so there is no
// output to poison.
#include <gtest/gtest.h>

#include <string>

#include "core/kernels/rope.h"
#include "tests/gpu/gpu_test_util.h"

namespace braid::gpu_test {
namespace {

// The default RoPE with base frequency theta.
RopeScaling rs(float theta) {
  RopeScaling r;
  r.theta = theta;
  return r;
}

double atol(DType d) { return d == DType::F32 ? 1e-5 : atol_for(d); }
double rtol(DType d) { return d == DType::F32 ? 1e-5 : rtol_for(d); }

// A scaled rope type with the parameters its HF configs use (llama3: low 1, high 4; yarn:
// beta_fast 32, beta_slow 1, the defaults).
RopeScaling scaled(RopeType type, float theta, double factor, int64_t original) {
  RopeScaling r = rs(theta);
  r.type = type;
  r.factor = factor;
  r.original_context = original;
  return r;
}

struct Case {
  Shape shape;  // (B, T, H, D)
  int64_t pos_offset;
  RopeScaling rope;
};
const Case kCases[] = {{{1, 1, 1, 2}, 0, rs(10000.0f)},
                       {{2, 31, 3, 64}, 0, rs(10000.0f)},
                       {{1, 257, 2, 130}, 100000, rs(500000.0f)},
                       {{3, 5, 1, 4098}, 7, rs(10000.0f)},
                       {{2, 17, 5, 6}, 123456789, rs(10000.0f)},
                       {{2, 33, 2, 64}, 5, scaled(RopeType::Linear, 10000.0f, 4.0, 0)},
                       {{1, 70, 3, 128}, 9000, scaled(RopeType::Llama3, 500000.0f, 8.0, 8192)},
                       {{2, 40, 2, 96}, 3, scaled(RopeType::Yarn, 10000.0f, 4.0, 4096)}};

class GpuRope : public GpuTest, public ::testing::WithParamInterface<DType> {};

TEST_P(GpuRope, ForwardAndBackwardMatchCpu) {
  const DType dt = GetParam();
  for (const Case& c : kCases) {
    const std::string at = "T=" + std::to_string(c.shape[1]) + " D=" + std::to_string(c.shape[3]) +
                           " pos=" + std::to_string(c.pos_offset) + " " +
                           std::string(enum_name(c.rope.type));
    const Tensor x = random_host(c.shape, dt, 1, -2.0f, 2.0f);
    Tensor x_c = x.clone();
    rope_forward(cpu(), x_c, c.pos_offset, c.rope);
    Tensor gx = up(x);
    rope_forward(gpu(), gx, c.pos_offset, c.rope);
    EXPECT_TRUE(close(gx, x_c, atol(dt), rtol(dt))) << "forward " << at;

    rope_backward(cpu(), x_c, c.pos_offset, c.rope);
    rope_backward(gpu(), gx, c.pos_offset, c.rope);
    EXPECT_TRUE(close(gx, x_c, atol(dt), rtol(dt))) << "backward " << at;
    // The rotation is orthogonal: backward after forward gives x back (to rounding), but for
    // yarn, whose cos and sin are scaled by its attention factor (squared by the round trip).
    if (c.rope.type != RopeType::Yarn) {
      EXPECT_TRUE(close(gx, x, 2 * atol(dt), 2 * rtol(dt))) << "round trip " << at;
    }
  }
}

TEST_P(GpuRope, RejectsWhatTheCpuRejects) {
  Tensor odd = up(random_host({1, 2, 1, 3}, GetParam(), 2));
  EXPECT_THROW(rope_forward(gpu(), odd, 0, rs(10000.0f)), std::runtime_error);
  Tensor x = up(random_host({1, 2, 1, 4}, GetParam(), 3));
  EXPECT_THROW(rope_forward(gpu(), x, -1, rs(10000.0f)), std::runtime_error);
  EXPECT_THROW(rope_backward(gpu(), x, 0, rs(0.0f)), std::runtime_error);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GpuRope, ::testing::Values(DType::F32, DType::BF16, DType::F16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace braid::gpu_test
