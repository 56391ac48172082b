// The blocked transposes (core/kernels/cpu/transpose.h) at every instruction-set level against
// plain loops: whole 16 x 16 blocks, right and bottom edges, strides wider than the data; the
// f32 -> bf16 one against narrowing each output row whole on the same conversion path, with
// subnormals, infinities and NaN among the values (the Avx512Bf16 path flushes bf16
// subnormals: a block and a row's scalar tail must round like the row would).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/kernels/cpu/convert.h"
#include "core/kernels/cpu/transpose.h"
#include "kernel_test_util.h"

namespace braid {
namespace {

class Transpose : public kernel_test::AtCpuIsa {};

const int64_t kSizes[][2] = {{16, 16}, {64, 256}, {1, 1}, {15, 17}, {17, 15}, {33, 48}, {48, 33}};

TEST_P(Transpose, MovesEveryElementOnce) {
  const CpuIsa isa = GetParam();
  for (const auto& sz : kSizes) {
    const int64_t rows = sz[0], cols = sz[1], lds = cols + 3, ldd = rows + 5;
    std::vector<uint32_t> s32(static_cast<size_t>(rows * lds));
    std::vector<uint16_t> s16(s32.size());
    for (size_t i = 0; i < s32.size(); ++i) {
      s32[i] = static_cast<uint32_t>(kernel_test::Rng(i + 1).next());
      s16[i] = static_cast<uint16_t>(s32[i] >> 7);
    }
    std::vector<uint32_t> d32(static_cast<size_t>(cols * ldd), 0xdeadbeefu);
    std::vector<uint16_t> d16(d32.size(), 0xbeef);
    cpu::transpose_u32(isa, d32.data(), ldd, s32.data(), lds, rows, cols);
    cpu::transpose_u16(isa, d16.data(), ldd, s16.data(), lds, rows, cols);
    for (int64_t c = 0; c < cols; ++c) {
      for (int64_t r = 0; r < ldd; ++r) {
        const size_t o = static_cast<size_t>(c * ldd + r);
        const bool in = r < rows;
        ASSERT_EQ(d32[o], in ? s32[static_cast<size_t>(r * lds + c)] : 0xdeadbeefu)
            << rows << "x" << cols << " r " << r << " c " << c;
        ASSERT_EQ(d16[o], in ? s16[static_cast<size_t>(r * lds + c)] : 0xbeef)
            << rows << "x" << cols << " r " << r << " c " << c;
      }
    }
  }
}

TEST_P(Transpose, F32ToBf16RoundsLikeNarrowingEachRow) {
  const CpuIsa isa = GetParam();
  const cpu::ConvertIsa path = cpu::convert_path(isa);
  const float specials[] = {
      1e-40f,        -3e-39f, 1.17e-38f, std::numeric_limits<float>::infinity(),
      std::nanf(""), -0.0f,   3.0e38f,   1.00390625f};
  for (const auto& sz : kSizes) {
    const int64_t rows = sz[0], cols = sz[1], lds = cols + 1, ldd = rows + 2;
    std::vector<float> src(static_cast<size_t>(rows * lds));
    kernel_test::Rng rng(7);
    for (size_t i = 0; i < src.size(); ++i)
      src[i] = i % 5 == 0 ? specials[(i / 5) % 8] : static_cast<float>(rng.uniform(-4, 4));
    std::vector<uint16_t> got(static_cast<size_t>(cols * ldd), 0x1234), want(got);
    cpu::transpose_f32_to_bf16(path, isa, got.data(), ldd, src.data(), lds, rows, cols);
    std::vector<float> column(static_cast<size_t>(rows));
    for (int64_t c = 0; c < cols; ++c) {
      for (int64_t r = 0; r < rows; ++r) column[r] = src[static_cast<size_t>(r * lds + c)];
      cpu::narrow_from_f32(path, DType::BF16, column.data(), want.data() + c * ldd, rows);
    }
    EXPECT_EQ(got, want) << rows << "x" << cols << " on " << cpu::convert_isa_name(path);
  }
}

INSTANTIATE_TEST_SUITE_P(Levels, Transpose, ::testing::ValuesIn(kAllCpuIsas),
                         kernel_test::cpu_isa_test_name);

}  // namespace
}  // namespace braid
