// The bf16/f16 conversion paths against the scalar definition in core/dtype.h: every path this
// CPU supports is run, and a context at every instruction-set level it has converts through
// that level's path; what the CPU lacks is skipped, naming the missing feature.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/kernels/cpu/convert.h"
#include "core/kernels/elementwise.h"
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

// One vector path per test, skipped where the CPU lacks its instructions.
class ConvertPath : public ::testing::TestWithParam<ConvertIsa> {};

TEST_P(ConvertPath, MatchesScalar) {
  const ConvertIsa isa = GetParam();
  if (!cpu::convert_isa_supported(isa))
    GTEST_SKIP() << "the " << cpu::convert_isa_name(isa)
                 << " path is not tested here: " << cpu_isa_missing(cpu::convert_isa_level(isa));
  // AVX2 is bit-identical to scalar; VCVTNEPS2BF16 flushes subnormal inputs to zero, and
  // everything else must agree.
  expect_matches_scalar(isa, DType::BF16, isa == ConvertIsa::Avx512Bf16);
  expect_matches_scalar(isa, DType::F16, false);
}

TEST_P(ConvertPath, RefusedWhereUnsupported) {
  const ConvertIsa isa = GetParam();
  if (cpu::convert_isa_supported(isa))
    GTEST_SKIP() << "this CPU runs the " << cpu::convert_isa_name(isa) << " path";
  float f = 1.0f;
  uint16_t h;
  kernel_test::expect_error_with([&] { cpu::narrow_from_f32(isa, DType::BF16, &f, &h, 1); },
                                 {cpu::convert_isa_name(isa), "this CPU has no"});
}

INSTANTIATE_TEST_SUITE_P(Convert, ConvertPath,
                         ::testing::Values(ConvertIsa::Avx2, ConvertIsa::Avx512Bf16),
                         [](const ::testing::TestParamInfo<ConvertIsa>& info) {
                           return std::string(cpu::convert_isa_name(info.param));
                         });

// One instruction-set level per test: a context at that level converts (cast, the threaded
// whole-array entry points) with exactly that level's path, and says so in its description.
class ConvertAtLevel : public kernel_test::AtCpuIsa {};

TEST_P(ConvertAtLevel, ContextUsesTheLevelsPath) {
  const CpuIsa level = GetParam();
  const ConvertIsa path = cpu::convert_path(level);
  const ConvertIsa want = level >= CpuIsa::Avx512Bf16 ? ConvertIsa::Avx512Bf16
                          : level >= CpuIsa::Avx2     ? ConvertIsa::Avx2
                                                      : ConvertIsa::Scalar;
  EXPECT_EQ(path, want);
  EXPECT_NE(cpu::convert_isa_description(level).find(cpu::convert_isa_name(path)),
            std::string::npos);
  ExecContext& ctx = this->ctx();
  // Large enough for several threads' chunks, with the tricky values (subnormals included,
  // where the paths differ) repeated through it.
  const std::vector<float> tricky = tricky_values();
  const int64_t n = (1 << 16) + 37;
  Tensor src = Tensor::empty({n});
  for (int64_t i = 0; i < n; ++i)
    src.f32()[i] = i % 3 == 0 ? tricky[static_cast<size_t>(i / 3) % tricky.size()]
                              : static_cast<float>(i % 1000) * 0.37f - 150.0f;
  for (DType t : {DType::BF16, DType::F16}) {
    SCOPED_TRACE(dtype_name(t));
    Tensor low = Tensor::empty({n}, t), back = Tensor::empty({n});
    cast(ctx, low, src);
    std::vector<uint16_t> want_bits(static_cast<size_t>(n));
    cpu::narrow_from_f32(path, t, src.f32(), want_bits.data(), n);
    EXPECT_EQ(std::memcmp(low.raw(), want_bits.data(), want_bits.size() * 2), 0)
        << "cast did not narrow through the " << cpu::convert_isa_name(path) << " path";
    cast(ctx, back, low);
    std::vector<float> want_back(static_cast<size_t>(n));
    cpu::widen_to_f32(path, t, low.raw(), want_back.data(), n);
    EXPECT_EQ(std::memcmp(back.f32(), want_back.data(), want_back.size() * 4), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Convert, ConvertAtLevel, ::testing::ValuesIn(kAllCpuIsas),
                         kernel_test::cpu_isa_test_name);

}  // namespace
}  // namespace braid
