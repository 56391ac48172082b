// dropout_apply (core/kernels/dropout.h): the drop rate, the 1/(1-p) scale of kept elements,
// the mask as a pure function of (seed, stream, index), and in-place use.
#include <gtest/gtest.h>
#include <omp.h>

#include <cstring>

#include "core/kernels/dropout.h"
#include "core/random.h"
#include "kernel_test_util.h"

namespace braid {
namespace {

TEST(KernelsDropout, RateScaleAndCounterBasedMask) {
  ExecContext& ctx = test_ctx();
  const int64_t n = 20000;
  Tensor x = kernel_test::random_tensor({n}, 1), y = Tensor::empty({n});
  const float p = 0.3f;
  dropout_apply(ctx, y, x, p, 42, 7);
  int64_t dropped = 0;
  for (int64_t i = 0; i < n; ++i) {
    const bool drop = uniform_at(42, 7, static_cast<uint64_t>(i)) < p;  // the documented mask
    if (drop) {
      ++dropped;
      EXPECT_EQ(y.f32()[i], 0.0f) << i;
    } else {
      EXPECT_EQ(y.f32()[i], x.f32()[i] * (1.0f / (1.0f - p))) << i;
    }
  }
  EXPECT_NEAR(static_cast<double>(dropped) / n, p, 0.02);
  // One thread gives the same mask; in place gives the same values; another stream differs.
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  Tensor z = x.clone();
  dropout_apply(ctx, z, z, p, 42, 7);
  omp_set_num_threads(threads);
  EXPECT_EQ(0, std::memcmp(z.f32(), y.f32(), y.nbytes()));
  Tensor w = Tensor::empty({n});
  dropout_apply(ctx, w, x, p, 42, 8);
  EXPECT_NE(0, std::memcmp(w.f32(), y.f32(), y.nbytes()));
  kernel_test::expect_error_with([&] { dropout_apply(ctx, y, x, 1.0f, 1, 1); },
                                 {"dropout_apply", "0 <= p < 1"});
}

// bf16/f16 storage (LoRA's dropout under train.precision bf16/fp16): the f32 result of the widened
// input, rounded once to the output's dtype, with the same mask; also in place.
TEST(KernelsDropout, SixteenBitStorageIsTheF32ResultRounded) {
  ExecContext& ctx = test_ctx();
  const int64_t n = 4099;
  for (DType dt : {DType::BF16, DType::F16}) {
    const Tensor x16 = kernel_test::random_tensor({n}, 5).to(dt, MemCategory::Other);
    const Tensor x32 = x16.to(DType::F32, MemCategory::Other);
    Tensor y32 = Tensor::empty({n}), y16 = Tensor::empty({n}, dt);
    dropout_apply(ctx, y32, x32, 0.25f, 9, 3);
    dropout_apply(ctx, y16, x16, 0.25f, 9, 3);
    const Tensor want = y32.to(dt, MemCategory::Other);
    EXPECT_EQ(0, std::memcmp(y16.raw(), want.raw(), want.nbytes())) << dtype_name(dt);
    Tensor z = x16.clone();  // in place
    dropout_apply(ctx, z, z, 0.25f, 9, 3);
    EXPECT_EQ(0, std::memcmp(z.raw(), want.raw(), want.nbytes())) << dtype_name(dt) << " in place";
  }
}

// A column window (a tensor-parallel rank's input columns) draws the whole tensor's mask there.
TEST(KernelsDropout, ColumnWindowDrawsTheWholeTensorsMask) {
  ExecContext& ctx = test_ctx();
  const int64_t rows = 37, full = 24, cols = 8, offset = 16;
  Tensor x = kernel_test::random_tensor({rows, full}, 3), whole = Tensor::empty({rows, full});
  dropout_apply(ctx, whole, x, 0.4f, 5, 9);
  Tensor part = Tensor::empty({rows, cols});
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) part.f32()[r * cols + c] = x.f32()[r * full + offset + c];
  Tensor y = Tensor::empty({rows, cols});
  dropout_apply(ctx, y, part, 0.4f, 5, 9, {full, offset});
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      ASSERT_EQ(y.f32()[r * cols + c], whole.f32()[r * full + offset + c]) << r << " " << c;
  kernel_test::expect_error_with(
      [&] {
        dropout_apply(ctx, y, part, 0.4f, 5, 9, {full, 20});
      },
      {"dropout_apply", "do not fit"});
}

}  // namespace
}  // namespace braid
