// CUDA GELU and SwiGLU against their CPU twins (the same per-element math,
// core/kernels/math/activation.h): odd sizes, every float dtype, poisoned outputs, in place.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/kernels/activation.h"
#include "tests/gpu/gpu_test_util.h"

namespace braid::gpu_test {
namespace {

// The same formula on both sides; only FMA contraction may round differently.
double atol(DType d) { return d == DType::F32 ? 1e-5 : atol_for(d); }
double rtol(DType d) { return d == DType::F32 ? 1e-5 : rtol_for(d); }

const Shape kShapes[] = {{1, 1}, {1, 31}, {257, 1}, {3, 4097}, {129, 1000}};

class GpuActivation : public GpuTest, public ::testing::WithParamInterface<DType> {};

TEST_P(GpuActivation, GeluForwardBackwardMatchCpu) {
  const DType dt = GetParam();
  for (const Shape& sh : kShapes) {
    const std::string at = std::to_string(sh[0]) + "x" + std::to_string(sh[1]);
    // Wide enough for the exp clamp at both ends.
    const Tensor x = random_host(sh, dt, 1, -60.0f, 60.0f), dy = random_host(sh, dt, 2);
    Tensor y_c = Tensor::empty(sh, dt);
    gelu_forward(cpu(), y_c, x);
    const Tensor gx = up(x), gdy = up(dy);
    Tensor y = poisoned(sh, dt);
    gelu_forward(gpu(), y, gx);
    EXPECT_TRUE(close(y, y_c, atol(dt), rtol(dt))) << "y " << at;
    Tensor dx_c = Tensor::empty(sh, dt);
    gelu_backward(cpu(), dx_c, dy, x);
    Tensor dx = poisoned(sh, dt);
    gelu_backward(gpu(), dx, gdy, gx);
    EXPECT_TRUE(close(dx, dx_c, atol(dt), rtol(dt))) << "dx " << at;

    // In place: y = x and dx = dy.
    Tensor inplace = up(x);
    gelu_forward(gpu(), inplace, inplace);
    EXPECT_TRUE(close(inplace, y, 0, 0)) << at;
    Tensor dinplace = up(dy);
    gelu_backward(gpu(), dinplace, dinplace, gx);
    EXPECT_TRUE(close(dinplace, dx, 0, 0)) << at;
  }
}

// Training's pair: the derivative kept over the input, then a multiply.
TEST_P(GpuActivation, GeluWithDerivativeMatchesCpu) {
  const DType dt = GetParam();
  for (const Shape& sh : kShapes) {
    const std::string at = std::to_string(sh[0]) + "x" + std::to_string(sh[1]);
    const Tensor x = random_host(sh, dt, 6, -60.0f, 60.0f), dy = random_host(sh, dt, 7);
    Tensor y_c = Tensor::empty(sh, dt), d_c = x.clone();
    gelu_forward_with_derivative(cpu(), y_c, d_c, d_c);
    Tensor y = poisoned(sh, dt), d = up(x);
    gelu_forward_with_derivative(gpu(), y, d, d);
    EXPECT_TRUE(close(y, y_c, atol(dt), rtol(dt))) << "y " << at;
    EXPECT_TRUE(close(d, d_c, atol(dt), rtol(dt))) << "dydx " << at;
    Tensor dx_c = Tensor::empty(sh, dt);
    gelu_backward_with_derivative(cpu(), dx_c, dy, d_c);
    Tensor dx = up(dy);  // in place: dx = dy, from the CPU's derivative
    gelu_backward_with_derivative(gpu(), dx, dx, up(d_c));
    EXPECT_TRUE(close(dx, dx_c, 0, 0)) << "dx " << at;  // one rounded product: exact
  }
}

TEST_P(GpuActivation, SwigluForwardBackwardMatchCpu) {
  const DType dt = GetParam();
  for (const Shape& sh : kShapes) {
    const std::string at = std::to_string(sh[0]) + "x" + std::to_string(sh[1]);
    const Tensor g = random_host(sh, dt, 3, -95.0f, 95.0f), u = random_host(sh, dt, 4, -3.0f, 3.0f),
                 dy = random_host(sh, dt, 5);
    Tensor y_c = Tensor::empty(sh, dt);
    swiglu_forward(cpu(), y_c, g, u);
    const Tensor gg = up(g), gu = up(u), gdy = up(dy);
    Tensor y = poisoned(sh, dt);
    swiglu_forward(gpu(), y, gg, gu);
    EXPECT_TRUE(close(y, y_c, atol(dt), rtol(dt))) << "y " << at;
    Tensor dg_c = Tensor::empty(sh, dt), du_c = Tensor::empty(sh, dt);
    swiglu_backward(cpu(), dg_c, du_c, dy, g, u);
    Tensor dg = poisoned(sh, dt), du = poisoned(sh, dt);
    swiglu_backward(gpu(), dg, du, gdy, gg, gu);
    EXPECT_TRUE(close(dg, dg_c, atol(dt), rtol(dt))) << "dgate " << at;
    EXPECT_TRUE(close(du, du_c, atol(dt), rtol(dt))) << "dup " << at;
  }
}

// A NaN input stays NaN (a diverged run must show as NaN, not as a clamped finite value).
class GpuActivationNaN : public GpuTest {};

TEST_F(GpuActivationNaN, NaNInputsStayNaN) {
  Tensor x = poisoned({1, 33}, DType::F32), y = poisoned({1, 33}, DType::F32);
  Tensor ones = up(random_host({1, 33}, DType::F32, 6, 1.0f, 1.0f));
  gelu_forward(gpu(), y, x);
  for (float v : values(y)) EXPECT_TRUE(std::isnan(v));
  swiglu_forward(gpu(), y, x, ones);
  for (float v : values(y)) EXPECT_TRUE(std::isnan(v));
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GpuActivation,
                         ::testing::Values(DType::F32, DType::BF16, DType::F16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace braid::gpu_test
