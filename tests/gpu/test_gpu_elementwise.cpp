// CUDA elementwise glue ops against their CPU twins (odd sizes, every float dtype).
#include <gtest/gtest.h>

#include "core/kernels/elementwise.h"
#include "tests/gpu/gpu_test_util.h"

namespace braid::gpu_test {
namespace {

class GpuElementwise : public GpuTest, public ::testing::WithParamInterface<DType> {};

TEST_P(GpuElementwise, AddAxpbyCastMatchCpu) {
  const DType dt = GetParam();
  for (int64_t n : {1, 31, 257, 100003}) {
    Tensor a = random_host({n}, dt, 1), b = random_host({n}, dt, 2);
    Tensor y_cpu = Tensor::empty({n}, dt);
    add(cpu(), y_cpu, a, b);
    Tensor y = poisoned({n}, dt);
    Tensor ga = up(a), gb = up(b);
    add(gpu(), y, ga, gb);
    EXPECT_TRUE(close(y, y_cpu, atol_for(dt), rtol_for(dt))) << "add n=" << n;

    add_inplace(cpu(), y_cpu, a);
    add_inplace(gpu(), y, ga);
    EXPECT_TRUE(close(y, y_cpu, atol_for(dt), rtol_for(dt))) << "add_inplace n=" << n;

    scale_inplace(cpu(), y_cpu, -0.75f);
    scale_inplace(gpu(), y, -0.75f);
    EXPECT_TRUE(close(y, y_cpu, atol_for(dt), rtol_for(dt))) << "scale_inplace n=" << n;

    const double s_cpu = sum_squares(cpu(), a), s_gpu = sum_squares(gpu(), ga);
    EXPECT_NEAR(s_gpu, s_cpu, 1e-9 * s_cpu) << "sum_squares n=" << n;
  }
}

// Many tensors with one wait: each equals that tensor's sum_squares on the GPU, bit for bit.
TEST_P(GpuElementwise, SumSquaresEachIsSumSquaresOfEach) {
  const DType dt = GetParam();
  const std::vector<Tensor> xs = {up(random_host({200003}, dt, 11)), gpu().empty({0}, dt),
                                  up(random_host({17, 5}, dt, 12)), up(random_host({1}, dt, 13))};
  const std::vector<double> each = sum_squares_each(gpu(), xs);
  ASSERT_EQ(each.size(), xs.size());
  for (size_t i = 0; i < xs.size(); ++i) EXPECT_EQ(each[i], sum_squares(gpu(), xs[i])) << i;
}

TEST_P(GpuElementwise, CastsBothWays) {
  const DType dt = GetParam();
  Tensor x = random_host({7, 333}, DType::F32, 3, -100.0f, 100.0f);
  Tensor lo_cpu = Tensor::empty({7, 333}, dt);
  cast(cpu(), lo_cpu, x);
  Tensor lo = poisoned({7, 333}, dt);
  cast(gpu(), lo, up(x));
  EXPECT_TRUE(close(lo, lo_cpu, 0, 0)) << "round to nearest even on both";
  Tensor back = poisoned({7, 333}, DType::F32);
  cast(gpu(), back, lo);
  EXPECT_TRUE(close(back, lo_cpu, 0, 0));
}

// Arguments of different dtypes (an f32 residual stream plus a 16-bit branch, and the reverse),
// an output that is one of its inputs, casts between the two 16-bit types, and zero.
TEST_P(GpuElementwise, MixedDtypesAliasingAndZero) {
  const DType dt = GetParam();
  const int64_t n = 4099;
  const Tensor a32 = random_host({n}, DType::F32, 21), b16 = random_host({n}, dt, 22);
  Tensor y_cpu = a32.clone(), y = up(a32);
  add_inplace(cpu(), y_cpu, b16);
  add_inplace(gpu(), y, up(b16));
  EXPECT_TRUE(close(y, y_cpu, 1e-6, 1e-6)) << "f32 += " << dtype_name(dt);
  Tensor z_cpu = Tensor::empty({n}, dt), z = poisoned({n}, dt);
  add(cpu(), z_cpu, a32, b16);
  add(gpu(), z, up(a32), up(b16));
  EXPECT_TRUE(close(z, z_cpu, atol_for(dt), rtol_for(dt))) << dtype_name(dt) << " = f32 + 16-bit";
  Tensor w_cpu = b16.clone(), w = up(b16);
  add(cpu(), w_cpu, w_cpu, a32);  // y is a
  add(gpu(), w, w, up(a32));
  EXPECT_TRUE(close(w, w_cpu, atol_for(dt), rtol_for(dt))) << "y aliasing a";
  const DType other = dt == DType::BF16 ? DType::F16 : DType::BF16;
  Tensor o_cpu = Tensor::empty({n}, other), o = poisoned({n}, other);
  cast(cpu(), o_cpu, b16);
  cast(gpu(), o, up(b16));
  EXPECT_TRUE(close(o, o_cpu, 0, 0)) << dtype_name(dt) << " -> " << dtype_name(other);
  zero(gpu(), o);
  EXPECT_TRUE(close(o, Tensor::zeros({n}), 0, 0)) << "zero";
}

TEST_P(GpuElementwise, SplitConcatAndCopyRows) {
  const DType dt = GetParam();
  Tensor src = random_host({5, 3 + 8 + 1}, dt, 4);
  Tensor p0c = Tensor::empty({5, 3}, dt), p1c = Tensor::empty({5, 8}, dt),
         p2c = Tensor::empty({5, 1}, dt);
  split_columns(cpu(), {&p0c, &p1c, &p2c}, src);
  Tensor p0 = poisoned({5, 3}, dt), p1 = poisoned({5, 8}, dt), p2 = poisoned({5, 1}, dt);
  split_columns(gpu(), {&p0, &p1, &p2}, up(src));
  EXPECT_TRUE(close(p0, p0c, 0, 0));
  EXPECT_TRUE(close(p1, p1c, 0, 0));
  EXPECT_TRUE(close(p2, p2c, 0, 0));
  Tensor whole = poisoned({5, 12}, dt);
  concat_columns(gpu(), whole, {&p0, &p1, &p2});
  EXPECT_TRUE(close(whole, src, 0, 0));

  Tensor cache = poisoned({9, 12}, dt);
  copy_rows(gpu(), cache, 4, whole);
  const std::vector<float> got = values(cache), want = values(src);
  for (int64_t i = 0; i < 5 * 12; ++i)
    EXPECT_EQ(got[static_cast<size_t>(4 * 12 + i)], want[static_cast<size_t>(i)]);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GpuElementwise,
                         ::testing::Values(DType::F32, DType::BF16, DType::F16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace braid::gpu_test
