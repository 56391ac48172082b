// The run-time chosen bf16/f16 conversion paths against the scalar definition in core/dtype.h:
// every path this CPU supports is run; the AVX-512 BF16 one is skipped (saying so) elsewhere.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/kernels/cpu/convert.h"
#include "kernel_test_util.h"

namespace braid {
namespace {

using cpu::ConvertIsa;

// Values that stress rounding: ties, the largest finite values, overflow to inf, subnormals,
// signed zeros, inf and NaN, then random ones; 203 elements, so every path has a scalar tail.
std::vector<float> tricky_values() {
  std::vector<float> v = {0.0f,
                          -0.0f,
                          1.0f,
                          -1.0f,
                          1.00390625f,
                          1.01171875f,
                          1.0009765625f,
                          65504.0f,
                          65520.0f,
                          70000.0f,
                          -1e30f,
                          3.3895e38f,
                          1e-40f,
                          -1e-40f,
                          6e-8f,
                          3e-8f,
                          5.9604645e-8f,
                          1e-5f,
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN(),
                          std::numeric_limits<float>::max(),
                          std::numeric_limits<float>::min()};
  kernel_test::Rng rng(7);
  while (v.size() < 203) v.push_back(static_cast<float>(rng.uniform(-1000.0, 1000.0)));
  return v;
}

bool is_subnormal_bf16_input(float f) { return f != 0.0f && std::fabs(f) < 1.1754944e-38f; }

// Narrows and widens through `isa` and expects the scalar path's bits (NaN: any NaN).
void expect_matches_scalar(ConvertIsa isa, DType t, bool skip_subnormals) {
  const std::vector<float> v = tricky_values();
  const int64_t n = static_cast<int64_t>(v.size());
  std::vector<uint16_t> ref(n), got(n);
  cpu::narrow_from_f32(ConvertIsa::Scalar, t, v.data(), ref.data(), n);
  cpu::narrow_from_f32(isa, t, v.data(), got.data(), n);
  std::vector<float> wref(n), wgot(n);
  cpu::widen_to_f32(ConvertIsa::Scalar, t, ref.data(), wref.data(), n);
  cpu::widen_to_f32(isa, t, ref.data(), wgot.data(), n);
  int bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(v[i])) {
      EXPECT_TRUE(std::isnan(wref[i]) && std::isnan(wgot[i])) << "NaN at " << i;
      continue;
    }
    if (skip_subnormals && is_subnormal_bf16_input(v[i])) continue;
    if (ref[i] != got[i] && ++bad <= 5)
      ADD_FAILURE() << cpu::convert_isa_name(isa) << " " << dtype_name(t) << " narrow " << v[i]
                    << ": " << got[i] << " vs scalar " << ref[i];
    uint32_t a, b;
    std::memcpy(&a, &wref[i], 4);
    std::memcpy(&b, &wgot[i], 4);
    if (a != b && ++bad <= 5) ADD_FAILURE() << "widen of " << ref[i] << " differs";
  }
  EXPECT_EQ(bad, 0);
}

TEST(Convert, ScalarRoundsToNearestEven) {
  // 1 + 2^-8 is halfway between bf16 1 and 1 + 2^-7: ties go to the even mantissa (1).
  EXPECT_EQ(float_to_bf16(1.00390625f).bits, float_to_bf16(1.0f).bits);
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.01171875f)), 1.015625f);  // tie, rounds up to even
  EXPECT_TRUE(std::isinf(f16_to_float(float_to_f16(70000.0f))));
  EXPECT_EQ(f16_to_float(float_to_f16(65504.0f)), 65504.0f);
}

TEST(Convert, Avx2PathMatchesScalarBitForBit) {
  if (!cpu::convert_isa_supported(ConvertIsa::Avx2)) GTEST_SKIP() << "this CPU has no AVX2/F16C";
  expect_matches_scalar(ConvertIsa::Avx2, DType::BF16, false);
  expect_matches_scalar(ConvertIsa::Avx2, DType::F16, false);
}

TEST(Convert, Avx512Bf16PathMatchesScalar) {
  if (!cpu::convert_isa_supported(ConvertIsa::Avx512Bf16))
    GTEST_SKIP() << "this CPU has no AVX512_BF16: the native conversion path is not tested here";
  // VCVTNEPS2BF16 flushes subnormal inputs to zero; everything else must agree.
  expect_matches_scalar(ConvertIsa::Avx512Bf16, DType::BF16, true);
  expect_matches_scalar(ConvertIsa::Avx512Bf16, DType::F16, false);
}

TEST(Convert, BestPathIsSupportedAndDescribed) {
  const ConvertIsa best = cpu::convert_isa_best();
  EXPECT_TRUE(cpu::convert_isa_supported(best));
  EXPECT_NE(cpu::convert_isa_description().find(cpu::convert_isa_name(best)), std::string::npos);
  // The threaded whole-array entry points agree with the scalar path on a large array.
  const int64_t n = (1 << 16) + 37;
  std::vector<float> src(n), back(n);
  for (int64_t i = 0; i < n; ++i) src[i] = static_cast<float>(i % 1000) * 0.37f - 150.0f;
  std::vector<uint16_t> a(n), b(n);
  cpu::narrow_from_f32(DType::BF16, src.data(), a.data(), n);
  cpu::narrow_from_f32(ConvertIsa::Scalar, DType::BF16, src.data(), b.data(), n);
  EXPECT_EQ(a, b);
  cpu::widen_to_f32(DType::BF16, a.data(), back.data(), n);
  for (int64_t i = 0; i < n; i += 997) EXPECT_EQ(back[i], bf16_to_float(bf16{a[i]}));
}

TEST(Convert, UnsupportedPathIsRefused) {
  if (cpu::convert_isa_supported(ConvertIsa::Avx512Bf16)) GTEST_SKIP() << "every path runs here";
  float f = 1.0f;
  uint16_t h;
  kernel_test::expect_error_with(
      [&] { cpu::narrow_from_f32(ConvertIsa::Avx512Bf16, DType::BF16, &f, &h, 1); },
      {"avx512_bf16"});
}

}  // namespace
}  // namespace braid
