// Linear layer and elementwise CPU kernels vs double references.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/kernels/elementwise.h"
#include "core/kernels/linear.h"
#include "kernel_test_util.h"

namespace braid {
namespace {

using namespace kernel_test;

// y (N, OUT) = x (N, IN) w^T (OUT, IN) + b.
std::vector<double> ref_linear(const std::vector<double>& x, const std::vector<double>& w,
                               const std::vector<double>* b, int64_t N, int64_t IN, int64_t OUT) {
  std::vector<double> y(N * OUT);
  for (int64_t r = 0; r < N; ++r)
    for (int64_t o = 0; o < OUT; ++o) {
      double s = b ? (*b)[o] : 0.0;
      for (int64_t i = 0; i < IN; ++i) s += x[r * IN + i] * w[o * IN + i];
      y[r * OUT + o] = s;
    }
  return y;
}

TEST(KernelsLinear, ForwardWithAndWithoutBias) {
  const int64_t N = 5, IN = 7, OUT = 3;
  Tensor x = random_tensor({N, IN}, 1), w = random_tensor({OUT, IN}, 2),
         b = random_tensor({OUT}, 3);
  const auto xd = to_double(x), wd = to_double(w), bd = to_double(b);
  Tensor y = nan_tensor({N, OUT});
  linear_forward(test_ctx(), y, x, w, b);
  expect_close(y, ref_linear(xd, wd, &bd, N, IN, OUT), 1e-5, 1e-4, "y with bias");
  Tensor y2 = nan_tensor({N, OUT});
  linear_forward(test_ctx(), y2, x, w, Tensor());
  expect_close(y2, ref_linear(xd, wd, nullptr, N, IN, OUT), 1e-5, 1e-4, "y without bias");
}

// accumulate: y += x W^T, in f32 and in 16 bits (operands of y's dtype, and x of another dtype,
// which takes the staged path): the sum is f32 and y is rounded once, so 16-bit results are
// the double reference's rounding to within one unit in the last place. A bias is refused.
TEST(KernelsLinear, ForwardAccumulatesOntoY) {
  const int64_t N = 6, IN = 9, OUT = 5;
  const Tensor x = random_tensor({N, IN}, 11), w = random_tensor({OUT, IN}, 12),
               y0 = random_tensor({N, OUT}, 13, -4.0, 4.0);
  struct Case {
    DType x, w, y;
  };
  for (const Case c :
       {Case{DType::F32, DType::F32, DType::F32}, Case{DType::BF16, DType::BF16, DType::BF16},
        Case{DType::BF16, DType::BF16, DType::F32}, Case{DType::F32, DType::BF16, DType::BF16},
        Case{DType::F16, DType::F16, DType::F16}}) {
    const std::string what =
        fmt::format("x {} w {} y {}", dtype_name(c.x), dtype_name(c.w), dtype_name(c.y));
    Tensor xc = x.to(c.x), wc = w.to(c.w), y = y0.to(c.y);
    // The reference from the values the kernel sees (each operand already in its dtype).
    const auto xd = to_double(xc.to(DType::F32)), wd = to_double(wc.to(DType::F32));
    std::vector<double> ref = to_double(y.to(DType::F32));
    const std::vector<double> prod = ref_linear(xd, wd, nullptr, N, IN, OUT);
    for (size_t i = 0; i < ref.size(); ++i) ref[i] += prod[i];
    linear_forward(test_ctx(), y, xc, wc, Tensor(), /*accumulate=*/true);
    const double rtol = c.y == DType::BF16 ? 1.0 / 128 : c.y == DType::F16 ? 1.0 / 1024 : 1e-5;
    expect_close(y.to(DType::F32), ref, 1e-5, rtol, what);
  }
  Tensor y = y0.clone();
  expect_error_with([&] { linear_forward(test_ctx(), y, x, w, random_tensor({OUT}, 14), true); },
                    {"accumulate", "bias"});
}

TEST(KernelsLinear, BackwardOverwritesOrAccumulatesInputGrad) {
  const int64_t N = 5, IN = 7, OUT = 3;
  Tensor dy = random_tensor({N, OUT}, 4), w = random_tensor({OUT, IN}, 5);
  const auto dyd = to_double(dy), wd = to_double(w);
  std::vector<double> ref(N * IN);  // dy W
  for (int64_t r = 0; r < N; ++r)
    for (int64_t i = 0; i < IN; ++i)
      for (int64_t o = 0; o < OUT; ++o) ref[r * IN + i] += dyd[r * OUT + o] * wd[o * IN + i];
  Tensor dx = nan_tensor({N, IN});
  linear_backward_input(test_ctx(), dx, dy, w);
  expect_close(dx, ref, 1e-5, 1e-4, "dx overwritten");

  Tensor acc = random_tensor({N, IN}, 6);
  std::vector<double> ref_acc = to_double(acc);
  for (size_t i = 0; i < ref_acc.size(); ++i) ref_acc[i] += ref[i];
  linear_backward_input(test_ctx(), acc, dy, w, /*accumulate=*/true);
  expect_close(acc, ref_acc, 1e-5, 1e-4, "dx accumulated");
}

TEST(KernelsLinear, WeightGradAccumulatesAndBiasIsOptional) {
  // N = 70 rows spans several bias-sum chunks.
  const int64_t N = 70, IN = 7, OUT = 5;
  Tensor dy = random_tensor({N, OUT}, 7), x = random_tensor({N, IN}, 8);
  const auto dyd = to_double(dy), xd = to_double(x);
  Tensor dw = random_tensor({OUT, IN}, 9), db = random_tensor({OUT}, 10);
  std::vector<double> dw_ref = to_double(dw), db_ref = to_double(db);
  for (int64_t r = 0; r < N; ++r)
    for (int64_t o = 0; o < OUT; ++o) {
      db_ref[o] += dyd[r * OUT + o];
      for (int64_t i = 0; i < IN; ++i) dw_ref[o * IN + i] += dyd[r * OUT + o] * xd[r * IN + i];
    }
  const std::vector<double> dw_first = to_double(dw);
  linear_backward_weight(test_ctx(), dw, db, dy, x);
  expect_close(dw, dw_ref, 1e-5, 1e-4, "dw");
  expect_close(db, db_ref, 1e-5, 1e-4, "db");

  Tensor dw2 = Tensor::zeros({OUT, IN}), no_bias;
  linear_backward_weight(test_ctx(), dw2, no_bias, dy, x);
  std::vector<double> delta(dw_ref.size());
  for (size_t i = 0; i < delta.size(); ++i) delta[i] = dw_ref[i] - dw_first[i];
  expect_close(dw2, delta, 1e-5, 1e-4, "dw without db");
}

// overwrite = true writes what accumulating onto zeros gives, bit for bit, without reading the
// old contents (NaN here), for f32 and bf16 operands, and for an empty batch (N = 0).
TEST(KernelsLinear, WeightGradOverwriteEqualsAddingOntoZeros) {
  for (const DType t : {DType::F32, DType::BF16}) {
    for (const int64_t N : {int64_t{70}, int64_t{0}}) {
      const int64_t IN = 7, OUT = 5;
      const Tensor dy = random_tensor({N, OUT}, 7).to(t), x = random_tensor({N, IN}, 8).to(t);
      Tensor dw = Tensor::zeros({OUT, IN}), db = Tensor::zeros({OUT});
      linear_backward_weight(test_ctx(), dw, db, dy, x);
      Tensor dw2 = Tensor::empty({OUT, IN}), db2 = Tensor::empty({OUT});
      dw2.fill_(std::nanf(""));
      db2.fill_(std::nanf(""));
      linear_backward_weight(test_ctx(), dw2, db2, dy, x, /*overwrite=*/true);
      EXPECT_TRUE(bitwise_equal(dw, dw2)) << dtype_name(t) << " N " << N;
      EXPECT_TRUE(bitwise_equal(db, db2)) << dtype_name(t) << " N " << N;
    }
  }
}

TEST(KernelsLinear, BiasGradDoesNotDependOnThreadCount) {
  const int64_t N = 1000, IN = 3, OUT = 37;
  Tensor dy = random_tensor({N, OUT}, 11), x = random_tensor({N, IN}, 12);
  auto run = [&](int threads) {
    Tensor dw = Tensor::zeros({OUT, IN}), db = Tensor::zeros({OUT});
    with_threads(threads, [&] { linear_backward_weight(test_ctx(), dw, db, dy, x); });
    return db;
  };
  EXPECT_TRUE(bitwise_equal(run(1), run(3)));
}

TEST(KernelsLinear, RejectsMismatchedShapes) {
  Tensor x = random_tensor({5, 7}, 1), w = random_tensor({3, 6}, 2), y = Tensor::empty({5, 3});
  expect_error_with([&] { linear_forward(test_ctx(), y, x, w, Tensor()); },
                    {"w", "[3, 6]", "[3, 7]"});
}

TEST(KernelsElementwise, AddAliasingAndInPlaceOps) {
  Tensor a = random_tensor({5, 7}, 1), b = random_tensor({5, 7}, 2);
  const auto ad = to_double(a), bd = to_double(b);
  std::vector<double> sum(ad.size()), twice_b(bd.size());
  for (size_t i = 0; i < ad.size(); ++i) sum[i] = ad[i] + bd[i];
  Tensor y = nan_tensor({5, 7});
  add(test_ctx(), y, a, b);
  expect_close(y, sum, 0, 1e-7, "y = a + b");
  Tensor a2 = a.clone();
  add(test_ctx(), a2, a2, b);  // y aliases a
  EXPECT_TRUE(bitwise_equal(a2, y)) << "y aliasing a";
  Tensor b2 = b.clone();
  add(test_ctx(), b2, a, b2);  // y aliases b
  EXPECT_TRUE(bitwise_equal(b2, y)) << "y aliasing b";

  Tensor acc = a.clone();
  add_inplace(test_ctx(), acc, b);
  EXPECT_TRUE(bitwise_equal(acc, y)) << "add_inplace";
  scale_inplace(test_ctx(), acc, -0.5f);
  for (double& v : sum) v *= -0.5;
  expect_close(acc, sum, 1e-7, 1e-6, "scale_inplace");
  expect_error_with(
      [&] {
        add_inplace(test_ctx(), acc, Tensor::empty({7, 5}));
      },
      {"[7, 5]", "[5, 7]"});
}

TEST(KernelsElementwise, SumSquaresIsAccurateAndThreadIndependent) {
  const int64_t n = 100003;  // several blocks, the last one partial
  Tensor x = random_tensor({n}, 3, -3.0, 3.0);
  double ref = 0;
  for (double v : to_double(x)) ref += v * v;
  double r1 = 0, r3 = 0;
  with_threads(1, [&] { r1 = sum_squares(test_ctx(), x); });
  with_threads(3, [&] { r3 = sum_squares(test_ctx(), x); });
  EXPECT_NEAR(r1, ref, 1e-9 * ref);
  EXPECT_EQ(r1, r3);
  EXPECT_EQ(sum_squares(test_ctx(), Tensor::empty({0})), 0.0);
  // The documented order, which every CPU follows: 16 interleaved double accumulators added
  // in order. 1 + 2^-54 rounds back to 1, so adding the fifteen 2^-54 lanes to lane 0's 1 one
  // at a time leaves exactly 1; any other grouping (pairs of lanes, a tree, the reverse) sums
  // some of them first and ends above 1.
  Tensor y = Tensor::empty({16});
  y.f32()[0] = 1.0f;
  for (int i = 1; i < 16; ++i) y.f32()[i] = std::ldexp(1.0f, -27);
  EXPECT_EQ(sum_squares(test_ctx(), y), 1.0);
}

// Many tensors at once give each tensor's sum_squares, bit for bit (empty and 16-bit ones too).
TEST(KernelsElementwise, SumSquaresEachIsSumSquaresOfEach) {
  const std::vector<Tensor> xs = {random_tensor({100003}, 4, -3.0, 3.0), Tensor::empty({0}),
                                  random_tensor({17, 5}, 5).to(DType::BF16, MemCategory::Other),
                                  random_tensor({1}, 6)};
  const std::vector<double> each = sum_squares_each(test_ctx(), xs);
  ASSERT_EQ(each.size(), xs.size());
  for (size_t i = 0; i < xs.size(); ++i) EXPECT_EQ(each[i], sum_squares(test_ctx(), xs[i])) << i;
  EXPECT_TRUE(sum_squares_each(test_ctx(), {}).empty());
}

}  // namespace
}  // namespace braid
