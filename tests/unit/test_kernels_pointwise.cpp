// GELU, SwiGLU and RoPE CPU kernels vs double references, finite differences and hand values.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/kernels/activation.h"
#include "core/kernels/rope.h"
#include "core/kernels/rope_freq.h"
#include "kernel_test_util.h"

namespace braid {
namespace {

using namespace kernel_test;

double ref_gelu(double x) {
  const double k = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}
double ref_silu(double x) { return x / (1.0 + std::exp(-x)); }

// Random values plus saturating ones, where a naive exp/tanh would give inf or NaN.
Tensor activation_input(const Shape& shape, uint64_t seed) {
  Tensor x = random_tensor(shape, seed, -4.0, 4.0);
  const float special[] = {-90.0f, -30.0f, -10.0f, -5.0f, 0.0f, 5.0f, 10.0f, 30.0f, 90.0f};
  float* p = x.f32();
  for (int64_t i = 0; i < std::min<int64_t>(9, x.numel()); ++i) p[i] = special[i];
  return x;
}

TEST(KernelsActivation, GeluForwardBackwardAndAliasing) {
  const Shape shape = {5, 7};
  Tensor x = activation_input(shape, 1);
  const auto xd = to_double(x);
  std::vector<double> yref(xd.size());
  for (size_t i = 0; i < xd.size(); ++i) yref[i] = ref_gelu(xd[i]);
  Tensor y = nan_tensor(shape);
  gelu_forward(test_ctx(), y, x);
  expect_close(y, yref, 1e-5, 1e-4, "gelu y");
  Tensor inplace = x.clone();
  gelu_forward(test_ctx(), inplace, inplace);  // y aliases x
  EXPECT_TRUE(bitwise_equal(inplace, y));

  Tensor dy = random_tensor(shape, 2);
  const auto dyd = to_double(dy);
  auto loss = [&](const std::vector<double>& v) {
    double s = 0;
    for (size_t i = 0; i < v.size(); ++i) s += ref_gelu(v[i]) * dyd[i];
    return s;
  };
  Tensor dx = nan_tensor(shape);
  gelu_backward(test_ctx(), dx, dy, x);
  expect_close(dx, finite_diff(loss, xd), 1e-5, 1e-3, "gelu dx");
  Tensor dy_alias = dy.clone();
  gelu_backward(test_ctx(), dy_alias, dy_alias, x);  // dx aliases dy
  EXPECT_TRUE(bitwise_equal(dy_alias, dx));
}

// Training's pair: the forward keeps gelu'(x) (here over x itself, as the model does) and the
// backward multiplies by it; the same bits as gelu_forward and gelu_backward.
TEST(KernelsActivation, GeluWithDerivativeGivesGeluAndGeluBackwardBits) {
  const Shape shape = {37, 444};  // three spans of 8192 per thread split, the last partial
  Tensor x = activation_input(shape, 6);
  Tensor dy = random_tensor(shape, 7);
  Tensor y_ref = nan_tensor(shape), dx_ref = nan_tensor(shape);
  gelu_forward(test_ctx(), y_ref, x);
  gelu_backward(test_ctx(), dx_ref, dy, x);

  Tensor y = nan_tensor(shape), d = x.clone();
  gelu_forward_with_derivative(test_ctx(), y, d, d);  // the derivative over the input
  EXPECT_TRUE(bitwise_equal(y, y_ref));
  Tensor dx = nan_tensor(shape);
  gelu_backward_with_derivative(test_ctx(), dx, dy, d);
  EXPECT_TRUE(bitwise_equal(dx, dx_ref));
  Tensor dy_alias = dy.clone();
  gelu_backward_with_derivative(test_ctx(), dy_alias, dy_alias, d);  // dx aliases dy
  EXPECT_TRUE(bitwise_equal(dy_alias, dx_ref));

  Tensor y2 = nan_tensor(shape), d2 = nan_tensor(shape);  // into a separate tensor
  gelu_forward_with_derivative(test_ctx(), y2, d2, x);
  EXPECT_TRUE(bitwise_equal(y2, y_ref));
  EXPECT_TRUE(bitwise_equal(d2, d));
  expect_error_with([&] { gelu_forward_with_derivative(test_ctx(), d2, d2, x); },
                    {"gelu_forward_with_derivative", "y must not share memory"});
}

TEST(KernelsActivation, SwigluForwardAndBackward) {
  const Shape shape = {5, 7};
  Tensor gate = activation_input(shape, 3), up = random_tensor(shape, 4, -2.0, 2.0);
  const auto gd = to_double(gate), ud = to_double(up);
  std::vector<double> yref(gd.size());
  for (size_t i = 0; i < gd.size(); ++i) yref[i] = ref_silu(gd[i]) * ud[i];
  Tensor y = nan_tensor(shape);
  swiglu_forward(test_ctx(), y, gate, up);
  expect_close(y, yref, 1e-5, 1e-4, "swiglu y");

  Tensor dy = random_tensor(shape, 5);
  const auto dyd = to_double(dy);
  auto loss_g = [&](const std::vector<double>& v) {
    double s = 0;
    for (size_t i = 0; i < v.size(); ++i) s += ref_silu(v[i]) * ud[i] * dyd[i];
    return s;
  };
  auto loss_u = [&](const std::vector<double>& v) {
    double s = 0;
    for (size_t i = 0; i < v.size(); ++i) s += ref_silu(gd[i]) * v[i] * dyd[i];
    return s;
  };
  Tensor dgate = nan_tensor(shape), dup = nan_tensor(shape);
  swiglu_backward(test_ctx(), dgate, dup, dy, gate, up);
  expect_close(dgate, finite_diff(loss_g, gd), 1e-5, 1e-3, "swiglu dgate");
  expect_close(dup, finite_diff(loss_u, ud), 1e-5, 1e-3, "swiglu dup");
}

// bf16/f16 are accepted (test_kernels_lowp.cpp); an integer tensor is refused, named.
TEST(KernelsActivation, RejectsOtherDtypes) {
  Tensor x = Tensor::empty({2, 2}, DType::I32), y = Tensor::empty({2, 2});
  expect_error_with([&] { gelu_forward(test_ctx(), y, x); }, {"gelu_forward", "i32"});
}

// x: (B, T, H, D) rotated as HF Llama does, in double.
// freq: the D/2 frequencies; every rotated pair is multiplied by scale.
std::vector<double> ref_rope(const std::vector<double>& x, const Shape& s, int64_t pos_offset,
                             const std::vector<double>& freq, double scale = 1.0) {
  const int64_t B = s[0], T = s[1], H = s[2], D = s[3], half = D / 2;
  std::vector<double> y(x);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < half; ++i) {
          const double angle = static_cast<double>(pos_offset + t) * freq[static_cast<size_t>(i)];
          const int64_t o = ((b * T + t) * H + h) * D;
          const double x1 = x[o + i], x2 = x[o + i + half];
          y[o + i] = scale * (x1 * std::cos(angle) - x2 * std::sin(angle));
          y[o + i + half] = scale * (x2 * std::cos(angle) + x1 * std::sin(angle));
        }
  return y;
}

std::vector<double> ref_rope(const std::vector<double>& x, const Shape& s, int64_t pos_offset,
                             double theta) {
  std::vector<double> freq;
  for (int64_t i = 0; i < s[3] / 2; ++i) freq.push_back(std::pow(theta, -2.0 * i / s[3]));
  return ref_rope(x, s, pos_offset, freq);
}

RopeScaling plain_rope(double theta) {
  RopeScaling r;
  r.theta = theta;
  return r;
}

struct RopeCase {
  Shape shape;
  int64_t pos_offset;
  float theta;
};

// Readable test names instead of a byte dump.
void PrintTo(const RopeCase& c, std::ostream* os) {
  *os << shape_str(c.shape) << " pos_offset=" << c.pos_offset << " theta=" << c.theta;
}

class RopeShapes : public ::testing::TestWithParam<RopeCase> {};

TEST_P(RopeShapes, ForwardBackwardAndRoundTrip) {
  const auto& [shape, pos_offset, theta] = GetParam();
  Tensor x = random_tensor(shape, 7);
  const auto xd = to_double(x);
  Tensor y = x.clone();
  rope_forward(test_ctx(), y, pos_offset, plain_rope(theta));
  expect_close(y, ref_rope(xd, shape, pos_offset, theta), 1e-5, 1e-4, "rope y");

  // Backward is the transpose of the forward map: check it against FD of <rope(x), g>.
  Tensor g = random_tensor(shape, 8);
  const auto gd = to_double(g);
  auto loss = [&](const std::vector<double>& v) {
    return dot(ref_rope(v, shape, pos_offset, theta), gd);
  };
  Tensor dx = g.clone();
  rope_backward(test_ctx(), dx, pos_offset, plain_rope(theta));
  expect_close(dx, finite_diff(loss, xd), 1e-5, 1e-4, "rope dx");

  rope_backward(test_ctx(), y, pos_offset,
                plain_rope(theta));  // the inverse rotation brings x back
  expect_close(y, xd, 1e-6, 1e-5, "rope round trip");
}

INSTANTIATE_TEST_SUITE_P(
    Kernels, RopeShapes,
    ::testing::Values(RopeCase{{2, 3, 1, 2}, 0, 10000.0f},   // D = 2, one head
                      RopeCase{{1, 1, 3, 8}, 5, 10000.0f},   // T = 1 (a decode step)
                      RopeCase{{2, 5, 2, 6}, 7, 500000.0f},  // D/2 odd, Llama 3 theta
                      // A long position: float angles would be off by ~0.1 rad here.
                      RopeCase{{1, 2, 1, 64}, 1000000, 10000.0f}));

TEST(KernelsRope, HandComputedValues) {
  // D = 2, position 1: freq 1, angle 1 rad; (1, 0) -> (cos 1, sin 1).
  Tensor a = Tensor::from_vector({1.0f, 0.0f}, {1, 1, 1, 2});
  rope_forward(test_ctx(), a, 1, plain_rope(10000.0));
  EXPECT_NEAR(a.f32()[0], 0.5403023f, 1e-6);
  EXPECT_NEAR(a.f32()[1], 0.8414710f, 1e-6);
  // D = 4, theta 100, position 2: pair (1, 3) has freq 100^(-1/2) = 0.1, angle 0.2;
  // (x1, x2) = (0, 1) -> (-sin 0.2, cos 0.2). Pair (0, 2) has angle 2: (2, 0) -> 2 (cos 2, sin 2).
  Tensor b = Tensor::from_vector({2.0f, 0.0f, 0.0f, 1.0f}, {1, 1, 1, 4});
  rope_forward(test_ctx(), b, 2, plain_rope(100.0));
  EXPECT_NEAR(b.f32()[0], 2 * -0.4161468f, 1e-6);
  EXPECT_NEAR(b.f32()[1], -0.1986693f, 1e-6);
  EXPECT_NEAR(b.f32()[2], 2 * 0.9092974f, 1e-6);
  EXPECT_NEAR(b.f32()[3], 0.9800666f, 1e-6);
}

// Frequencies and cos/sin scales printed by transformers 5.24 (modeling_rope_utils'
// ROPE_INIT_FUNCTIONS, head size 16, max_position_embeddings 256), in float32 there.
struct RopeFreqCase {
  const char* name;
  RopeScaling rope;
  double attention_scaling;
  std::vector<double> inv_freq;
};

RopeScaling scaled(RopeType type, double theta, double factor, int64_t original = 256) {
  RopeScaling r;
  r.type = type;
  r.theta = theta;
  r.factor = factor;
  r.original_context = original;
  return r;
}

std::vector<RopeFreqCase> transformers_rope_cases() {
  RopeScaling llama3 = scaled(RopeType::Llama3, 500000.0, 8.0, 64);
  RopeScaling yarn_m = scaled(RopeType::Yarn, 10000.0, 4.0, 64);
  yarn_m.beta_fast = 16.0;
  yarn_m.beta_slow = 2.0;
  yarn_m.mscale = 0.707;
  yarn_m.mscale_all_dim = 1.0;
  yarn_m.truncate = false;
  return {
      {"linear",
       scaled(RopeType::Linear, 10000.0, 4.0),
       1.0,
       {0.25, 0.07905694097280502, 0.02500000037252903, 0.007905694656074047, 0.0024999999441206455,
        0.0007905694656074047, 0.0002500000118743628, 7.905694656074047e-05}},
      {"llama3",
       llama3,
       1.0,
       {1.0, 0.07940301299095154, 0.004700753837823868, 0.0009115831344388425,
        0.00017677668074611574, 3.428102354519069e-05, 6.647869668086059e-06,
        1.289173155782919e-06}},
      {"yarn",
       scaled(RopeType::Yarn, 10000.0, 4.0, 64),
       1.138629436111989,
       {1.0, 0.23717081546783447, 0.04999999701976776, 0.007905694656074047, 0.0024999999441206455,
        0.0007905694656074047, 0.0002500000118743628, 7.905694656074047e-05}},
      {"yarn mscale, no truncation",
       yarn_m,
       0.964326914892074,
       {1.0, 0.14849025011062622, 0.02500000037252903, 0.007905694656074047, 0.0024999999441206455,
        0.0007905694656074047, 0.0002500000118743628, 7.905694656074047e-05}},
  };
}

TEST(KernelsRope, ScaledFrequenciesMatchTransformers) {
  for (const RopeFreqCase& c : transformers_rope_cases()) {
    EXPECT_NEAR(rope_attention_scaling(c.rope), c.attention_scaling, 1e-12) << c.name;
    for (size_t i = 0; i < c.inv_freq.size(); ++i)  // float32 there: 1e-6 relative
      EXPECT_NEAR(rope_inv_freq(c.rope, static_cast<int64_t>(i), 16), c.inv_freq[i],
                  1e-6 * c.inv_freq[i])
          << c.name << " pair " << i;
  }
}

// The kernel rotates by those frequencies and scales by the attention factor; its backward is
// the transpose (finite differences of <rope(x), g>).
TEST(KernelsRope, ScaledForwardBackward) {
  const Shape shape = {2, 3, 2, 16};
  for (const RopeFreqCase& c : transformers_rope_cases()) {
    Tensor x = random_tensor(shape, 11);
    const auto xd = to_double(x);
    Tensor y = x.clone();
    rope_forward(test_ctx(), y, 40, c.rope);
    const auto ref = [&](const std::vector<double>& v) {
      return ref_rope(v, shape, 40, c.inv_freq, c.attention_scaling);
    };
    expect_close(y, ref(xd), 1e-5, 1e-4, c.name);
    Tensor g = random_tensor(shape, 12);
    const auto gd = to_double(g);
    Tensor dx = g.clone();
    rope_backward(test_ctx(), dx, 40, c.rope);
    expect_close(dx, finite_diff([&](const std::vector<double>& v) { return dot(ref(v), gd); }, xd),
                 1e-5, 1e-4, c.name);
  }
}

TEST(KernelsRope, RejectsOddHeadDim) {
  Tensor x = Tensor::empty({1, 1, 1, 3});
  expect_error_with([&] { rope_forward(test_ctx(), x, 0, plain_rope(10000.0)); }, {"even", "3"});
}

}  // namespace
}  // namespace braid
