// LayerNorm and RMSNorm CPU kernels vs double references and finite differences.
#include <gtest/gtest.h>

#include <cmath>

#include "core/kernels/layernorm.h"
#include "core/kernels/rmsnorm.h"
#include "kernel_test_util.h"

namespace braid {
namespace {

using namespace kernel_test;

constexpr double kEps = 1e-5;

// y: (N, C) from x: (N, C), w, b: (C).
std::vector<double> ref_layernorm(const std::vector<double>& x, const std::vector<double>& w,
                                  const std::vector<double>& b, int64_t N, int64_t C) {
  std::vector<double> y(x.size());
  for (int64_t r = 0; r < N; ++r) {
    double m = 0, v = 0;
    for (int64_t c = 0; c < C; ++c) m += x[r * C + c];
    m /= C;
    for (int64_t c = 0; c < C; ++c) v += (x[r * C + c] - m) * (x[r * C + c] - m);
    const double rs = 1 / std::sqrt(v / C + kEps);
    for (int64_t c = 0; c < C; ++c) y[r * C + c] = (x[r * C + c] - m) * rs * w[c] + b[c];
  }
  return y;
}

std::vector<double> ref_rmsnorm(const std::vector<double>& x, const std::vector<double>& w,
                                int64_t N, int64_t C) {
  std::vector<double> y(x.size());
  for (int64_t r = 0; r < N; ++r) {
    double ss = 0;
    for (int64_t c = 0; c < C; ++c) ss += x[r * C + c] * x[r * C + c];
    const double rs = 1 / std::sqrt(ss / C + kEps);
    for (int64_t c = 0; c < C; ++c) y[r * C + c] = x[r * C + c] * rs * w[c];
  }
  return y;
}

std::vector<double> plus(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> r(a);
  for (size_t i = 0; i < r.size(); ++i) r[i] += b[i];
  return r;
}

class LayerNormShapes : public ::testing::TestWithParam<std::pair<int64_t, int64_t>> {};

TEST_P(LayerNormShapes, ForwardAndBackwardMatchDoubleReference) {
  const auto [N, C] = GetParam();
  // An offset mean (3.0) checks that the variance does not cancel.
  Tensor x = random_tensor({N, C}, 1, 2.0, 4.0);
  Tensor w = random_tensor({C}, 2, 0.5, 1.5), b = random_tensor({C}, 3);
  Tensor y = nan_tensor({N, C}), mean = nan_tensor({N}), rstd = nan_tensor({N});
  layernorm_forward(test_ctx(), y, mean, rstd, x, w, b, static_cast<float>(kEps));
  const auto xd = to_double(x), wd = to_double(w), bd = to_double(b);
  expect_close(y, ref_layernorm(xd, wd, bd, N, C), 1e-5, 1e-4, "y");
  std::vector<double> mref(N);
  for (int64_t r = 0; r < N; ++r)
    for (int64_t c = 0; c < C; ++c) mref[r] += xd[r * C + c] / C;
  expect_close(mean, mref, 1e-6, 1e-5, "mean");

  Tensor dy = random_tensor({N, C}, 4);
  const auto dyd = to_double(dy);
  Tensor dx = nan_tensor({N, C});  // overwritten, so NaN must not survive
  Tensor dw = random_tensor({C}, 5), db = random_tensor({C}, 6);  // accumulated into
  const auto dw0 = to_double(dw), db0 = to_double(db);
  layernorm_backward(test_ctx(), dx, dw, db, dy, x, w, mean, rstd);

  auto loss_x = [&](const std::vector<double>& v) {
    return dot(ref_layernorm(v, wd, bd, N, C), dyd);
  };
  auto loss_w = [&](const std::vector<double>& v) {
    return dot(ref_layernorm(xd, v, bd, N, C), dyd);
  };
  auto loss_b = [&](const std::vector<double>& v) {
    return dot(ref_layernorm(xd, wd, v, N, C), dyd);
  };
  expect_close(dx, finite_diff(loss_x, xd), 1e-4, 1e-3, "dx");
  expect_close(dw, plus(dw0, finite_diff(loss_w, wd)), 1e-4, 1e-3, "dw");
  expect_close(db, plus(db0, finite_diff(loss_b, bd)), 1e-4, 1e-3, "db");
}

// N = 40 spans three row chunks (the last one partial); C = 7 and 1 are odd widths.
INSTANTIATE_TEST_SUITE_P(Kernels, LayerNormShapes,
                         ::testing::Values(std::pair<int64_t, int64_t>{5, 7},
                                           std::pair<int64_t, int64_t>{1, 1},
                                           std::pair<int64_t, int64_t>{40, 9}));

class RmsNormShapes : public ::testing::TestWithParam<std::pair<int64_t, int64_t>> {};

TEST_P(RmsNormShapes, ForwardAndBackwardMatchDoubleReference) {
  const auto [N, C] = GetParam();
  Tensor x = random_tensor({N, C}, 11, -2.0, 2.0);
  Tensor w = random_tensor({C}, 12, 0.5, 1.5);
  Tensor y = nan_tensor({N, C}), rstd = nan_tensor({N});
  rmsnorm_forward(test_ctx(), y, rstd, x, w, static_cast<float>(kEps));
  const auto xd = to_double(x), wd = to_double(w);
  expect_close(y, ref_rmsnorm(xd, wd, N, C), 1e-5, 1e-4, "y");

  Tensor dy = random_tensor({N, C}, 13);
  const auto dyd = to_double(dy);
  Tensor dx = nan_tensor({N, C});
  Tensor dw = random_tensor({C}, 14);
  const auto dw0 = to_double(dw);
  rmsnorm_backward(test_ctx(), dx, dw, dy, x, w, rstd);
  auto loss_x = [&](const std::vector<double>& v) { return dot(ref_rmsnorm(v, wd, N, C), dyd); };
  auto loss_w = [&](const std::vector<double>& v) { return dot(ref_rmsnorm(xd, v, N, C), dyd); };
  expect_close(dx, finite_diff(loss_x, xd), 1e-4, 1e-3, "dx");
  expect_close(dw, plus(dw0, finite_diff(loss_w, wd)), 1e-4, 1e-3, "dw");
}

INSTANTIATE_TEST_SUITE_P(Kernels, RmsNormShapes,
                         ::testing::Values(std::pair<int64_t, int64_t>{5, 7},
                                           std::pair<int64_t, int64_t>{1, 1},
                                           std::pair<int64_t, int64_t>{40, 9}));

// Parameter gradients must be bit-identical whatever the thread count.
TEST(KernelsNorm, WeightGradientsDoNotDependOnThreadCount) {
  const int64_t N = 333, C = 65;
  Tensor x = random_tensor({N, C}, 21), w = random_tensor({C}, 22), b = random_tensor({C}, 23);
  Tensor dy = random_tensor({N, C}, 24);
  Tensor y = Tensor::empty({N, C}), mean = Tensor::empty({N}), rstd = Tensor::empty({N});
  layernorm_forward(test_ctx(), y, mean, rstd, x, w, b, 1e-5f);
  Tensor rrstd = Tensor::empty({N});
  rmsnorm_forward(test_ctx(), y, rrstd, x, w, 1e-5f);
  auto run = [&](int threads) {
    std::vector<Tensor> out = {Tensor::zeros({C}), Tensor::zeros({C}), Tensor::zeros({C})};
    with_threads(threads, [&] {
      Tensor dx = Tensor::empty({N, C});
      layernorm_backward(test_ctx(), dx, out[0], out[1], dy, x, w, mean, rstd);
      rmsnorm_backward(test_ctx(), dx, out[2], dy, x, w, rrstd);
    });
    return out;
  };
  const auto one = run(1), three = run(3);
  for (size_t i = 0; i < one.size(); ++i) EXPECT_TRUE(bitwise_equal(one[i], three[i])) << i;
}

TEST(KernelsNorm, RejectsWrongShapesAndDtypes) {
  Tensor x = random_tensor({2, 3}, 1), w = random_tensor({3}, 2), y = Tensor::empty({2, 3});
  Tensor rstd = Tensor::empty({2});
  Tensor w_bad = random_tensor({4}, 3);
  expect_error_with([&] { rmsnorm_forward(test_ctx(), y, rstd, x, w_bad, 1e-5f); }, {"w", "[4]", "[3]"});
  // bf16/f16 storage is accepted (test_kernels_lowp.cpp); integer tensors and 16-bit saved
  // statistics are not.
  Tensor xi = Tensor::empty({2, 3}, DType::I32);
  expect_error_with([&] { rmsnorm_forward(test_ctx(), y, rstd, xi, w, 1e-5f); }, {"i32"});
  Tensor mean = Tensor::empty({2});
  expect_error_with([&] { layernorm_forward(test_ctx(), y, mean, rstd, x, w, xi, 1e-5f); },
                    {"i32", "b"});
  Tensor mean_bf16 = Tensor::empty({2}, DType::BF16);
  expect_error_with([&] { layernorm_forward(test_ctx(), y, mean_bf16, rstd, x, w, w, 1e-5f); },
                    {"mean", "bf16"});
}

}  // namespace
}  // namespace braid
