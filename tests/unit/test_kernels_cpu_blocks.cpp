// CPU building blocks of attention/cross-entropy: small_gemm edge tiles and strided A, the
// fast exps and softmax rows, each at every instruction-set level this CPU has (the rest skip
// naming the missing feature); and the cpuid probe behind those levels.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/kernels/cpu/cpu_isa.h"
#include "core/kernels/cpu/fast_math.h"
#include "core/kernels/cpu/small_gemm.h"
#include "core/kernels/cpu/vec_math.h"
#include "kernel_test_util.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define BRAID_TEST_AMX 1
#endif

namespace braid::cpu {
namespace {

std::vector<float> random_values(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

// The level a test runs its building block at (unsupported levels skip).
class KernelsCpuBlocksAt : public kernel_test::AtCpuIsa {};

TEST_P(KernelsCpuBlocksAt, SmallGemmMatchesNaiveOnEdgeShapes) {
  const CpuIsa isa = GetParam();
  uint32_t seed = 1;
  for (int64_t M : {1, 5, 6, 7, 12, 13, 25})
    for (int64_t N : {1, 8, 9, 16, 23, 32, 33, 70})
      for (int64_t K : {0, 1, 6, 17})
        for (bool transposed_a : {false, true})
          for (bool accumulate : {false, true}) {
            // A stored (M, K) with row stride K + 3, or (K, M) with row stride M + 2.
            const int64_t a_rs = transposed_a ? 1 : K + 3, a_cs = transposed_a ? M + 2 : 1;
            const int64_t ldb = N + 5, ldc = N + 4;
            const auto a = random_values(
                static_cast<size_t>((transposed_a ? K : M) * (transposed_a ? M + 2 : K + 3)) + 1,
                ++seed);
            const auto b = random_values(static_cast<size_t>(K * ldb) + 1, ++seed);
            auto c = random_values(static_cast<size_t>(M * ldc), ++seed);
            const auto c0 = c;
            if (!accumulate)  // without accumulate C must not be read
              for (int64_t i = 0; i < M; ++i)
                for (int64_t j = 0; j < N; ++j) c[i * ldc + j] = NAN;
            // The AVX-512 tile computes each element as the AVX2 tile does (the same FMA chain).
            auto c_avx2 = c;
            small_gemm(isa, M, N, K, 0.5f, a.data(), a_rs, a_cs, b.data(), ldb, accumulate,
                       c.data(), ldc);
            if (isa >= CpuIsa::Avx512) {
              small_gemm(CpuIsa::Avx2, M, N, K, 0.5f, a.data(), a_rs, a_cs, b.data(), ldb,
                         accumulate, c_avx2.data(), ldc);
              for (size_t i = 0; i < c.size(); ++i)
                ASSERT_EQ(c[i], c_avx2[i]) << "differs from the AVX2 tile: M=" << M << " N=" << N
                                           << " K=" << K << " at " << i;
            }
            for (int64_t i = 0; i < M; ++i) {
              for (int64_t j = 0; j < N; ++j) {
                double want = accumulate ? c0[i * ldc + j] : 0.0;
                for (int64_t k = 0; k < K; ++k)
                  want += 0.5 * a[i * a_rs + k * a_cs] * b[k * ldb + j];
                ASSERT_NEAR(c[i * ldc + j], want, 1e-5)
                    << "M=" << M << " N=" << N << " K=" << K << " t=" << transposed_a
                    << " acc=" << accumulate << " at " << i << "," << j;
              }
              // Padding columns past N are never written.
              for (int64_t j = N; j < ldc; ++j) ASSERT_EQ(c[i * ldc + j], c0[i * ldc + j]);
            }
          }
}

// The bf16 pair product: the vector tile (Avx512Bf16) gives the scalar loop's bits (the same
// products, added in VDPBF16PS's order), and every level equals the exact sum within f32
// rounding (AMX's tile unit adds in its own order); edge shapes cover every tile height,
// masked column tails and pair counts short of a tile step; padding untouched.
TEST_P(KernelsCpuBlocksAt, SmallGemmBf16PairsMatchesScalarBits) {
  const CpuIsa isa = GetParam();
  uint32_t seed = 100;
  for (int64_t M : {1, 7, 8, 9, 16, 17, 33})
    for (int64_t N : {1, 15, 16, 17, 32, 33, 70})
      for (int64_t P : {0, 1, 3, 16, 17, 32, 40})
        for (bool accumulate : {false, true}) {
          const int64_t lda = 2 * P + 4, ldb = 2 * N + 6, ldc = N + 3;
          std::vector<bf16> a(static_cast<size_t>(M * lda)), b(static_cast<size_t>(P * ldb + 1));
          const auto av = random_values(a.size(), ++seed), bv = random_values(b.size(), ++seed);
          for (size_t i = 0; i < a.size(); ++i) a[i] = float_to_bf16(av[i]);
          for (size_t i = 0; i < b.size(); ++i) b[i] = float_to_bf16(bv[i]);
          auto c = random_values(static_cast<size_t>(M * ldc), ++seed);
          const auto c0 = c;
          if (!accumulate)
            for (int64_t i = 0; i < M; ++i)
              for (int64_t j = 0; j < N; ++j) c[i * ldc + j] = NAN;
          auto ref = c;
          small_gemm_bf16_pairs(isa, M, N, P, 0.5f, a.data(), lda, b.data(), ldb, accumulate,
                                c.data(), ldc);
          small_gemm_bf16_pairs(CpuIsa::Scalar, M, N, P, 0.5f, a.data(), lda, b.data(), ldb,
                                accumulate, ref.data(), ldc);
          for (int64_t i = 0; i < M; ++i) {
            for (int64_t j = 0; j < N; ++j) {
              double want = accumulate ? c0[i * ldc + j] : 0.0;
              for (int64_t p = 0; p < 2 * P; ++p)
                want += 0.5 * double(bf16_to_float(a[i * lda + p])) *
                        bf16_to_float(b[(p / 2) * ldb + 2 * j + p % 2]);
              ASSERT_NEAR(c[i * ldc + j], want, 1e-5)
                  << "M=" << M << " N=" << N << " P=" << P << " at " << i << "," << j;
              if (isa < CpuIsa::Amx) {
                ASSERT_EQ(c[i * ldc + j], ref[i * ldc + j])
                    << "differs from the scalar loop: M=" << M << " N=" << N << " P=" << P;
              }
            }
            for (int64_t j = N; j < ldc; ++j) ASSERT_EQ(c[i * ldc + j], c0[i * ldc + j]);
          }
        }
}

#ifdef BRAID_TEST_AMX
// This thread's AMX tile configuration (64 bytes; all zero when it holds none).
__attribute__((target("amx-tile"))) std::vector<uint8_t> tile_config() {
  alignas(64) uint8_t c[64] = {};
  _tile_storeconfig(c);
  return std::vector<uint8_t>(c, c + 64);
}

// Inside an AmxTileScope the pair product skips its own configure/restore: the same bits as
// outside one (alpha 1 takes the direct tile loads and stores, 0.5 the buffered path), the
// tiles configured while the scope lives (nested scopes too), and what the thread had before
// put back afterwards.
TEST(KernelsCpuBlocks, AmxTileScopeKeepsBitsAndRestoresTheTiles) {
  if (cpu_isa_detected() < CpuIsa::Amx) GTEST_SKIP() << cpu_isa_missing(CpuIsa::Amx);
  const int64_t M = 33, N = 70, P = 40, lda = 2 * P + 4, ldb = 2 * N + 6, ldc = N + 3;
  std::vector<bf16> a(static_cast<size_t>(M * lda)), b(static_cast<size_t>(P * ldb));
  const auto av = random_values(a.size(), 7), bv = random_values(b.size(), 8);
  for (size_t i = 0; i < a.size(); ++i) a[i] = float_to_bf16(av[i]);
  for (size_t i = 0; i < b.size(); ++i) b[i] = float_to_bf16(bv[i]);
  const auto c0 = random_values(static_cast<size_t>(M * ldc), 9);
  const std::vector<uint8_t> before = tile_config();
  for (float alpha : {1.0f, 0.5f})
    for (bool accumulate : {false, true}) {
      auto outside = c0, inside = c0;
      small_gemm_bf16_pairs(CpuIsa::Amx, M, N, P, alpha, a.data(), lda, b.data(), ldb, accumulate,
                            outside.data(), ldc);
      EXPECT_EQ(tile_config(), before) << "a call outside a scope restores the tiles";
      {
        const AmxTileScope scope(CpuIsa::Amx);
        EXPECT_NE(tile_config(), before);
        EXPECT_EQ(tile_config()[0], 1) << "palette 1";
        const AmxTileScope nested(CpuIsa::Amx);
        small_gemm_bf16_pairs(CpuIsa::Amx, M, N, P, alpha, a.data(), lda, b.data(), ldb, accumulate,
                              inside.data(), ldc);
      }
      EXPECT_EQ(tile_config(), before);
      EXPECT_EQ(0, std::memcmp(outside.data(), inside.data(), sizeof(float) * outside.size()))
          << "alpha " << alpha << " accumulate " << accumulate;
    }
  const AmxTileScope below(CpuIsa::Avx512Bf16);  // a no-op below Amx
  EXPECT_EQ(tile_config(), before);
}
#endif

TEST(KernelsCpuBlocks, ExpApproxIsAccurate) {
  for (float x = -80.0f; x <= 80.0f; x += 0.0137f) {
    const double want = std::exp(static_cast<double>(x));
    ASSERT_NEAR(exp_approx(x) / want, 1.0, 3e-7) << x;
  }
  EXPECT_TRUE(std::isnan(exp_approx(NAN)));
  EXPECT_LT(exp_approx(-1000.0f), 1e-37f);
}

// A diverged run feeds NaN logits to softmax: the result is NaN, and computing it is defined
// behaviour (the sanitizer build once reported signed overflow in exp_approx's exponent bits).
// volatile keeps the compiler from folding the NaN path away at compile time.
TEST_P(KernelsCpuBlocksAt, NanInputsStayNanWithoutUndefinedBehaviour) {
  volatile float nan_in = NAN;
  EXPECT_TRUE(std::isnan(exp_approx(nan_in)));
  EXPECT_TRUE(std::isnan(exp_f32(nan_in)));
  std::vector<float> row(19, 0.5f);
  row[3] = nan_in;
  softmax_row(GetParam(), row.data(), static_cast<int64_t>(row.size()), 1.0f);
  EXPECT_TRUE(std::isnan(row[0]));
}

TEST_P(KernelsCpuBlocksAt, SoftmaxRowsMatchDouble) {
  const CpuIsa isa = GetParam();
  for (int64_t n : {1, 7, 8, 16, 31, 100}) {
    auto s = random_values(static_cast<size_t>(n), static_cast<uint32_t>(n));
    for (auto& x : s) x *= 30.0f;
    const auto in = s;
    double m = -1e300, sum = 0;
    for (float x : in) m = std::max(m, double(x));
    for (float x : in) sum += std::exp(x - m);
    const float lse = softmax_row(isa, s.data(), n, 2.0f);
    EXPECT_NEAR(lse, m + std::log(sum), 1e-5 * std::abs(m) + 1e-6) << n;
    for (int64_t j = 0; j < n; ++j) {
      ASSERT_NEAR(s[j], 2.0 * std::exp(in[j] - m) / sum, 1e-6) << n << " " << j;
      s[j] = in[j];
    }
    exp_shifted_row(isa, s.data(), n, lse);
    for (int64_t j = 0; j < n; ++j) ASSERT_NEAR(s[j], std::exp(in[j] - m) / sum, 1e-6);
    for (int64_t j = 0; j < n; ++j) s[j] = in[j];
    const float got = exp_shifted_sum_row(isa, s.data(), n, static_cast<float>(m));
    EXPECT_NEAR(got, sum, 1e-6 * sum) << n;
    for (int64_t j = 0; j < n; ++j) ASSERT_NEAR(s[j], std::exp(in[j] - m), 1e-6) << n << " " << j;
  }
  float none = 5.0f;
  EXPECT_EQ(exp_shifted_sum_row(isa, &none, 0, 1.0f), 0.0f);
  EXPECT_EQ(none, 5.0f);
}

TEST_P(KernelsCpuBlocksAt, DotAndSoftmaxGradRowsMatchDouble) {
  const CpuIsa isa = GetParam();
  for (int64_t n : {1, 7, 8, 16, 31, 100}) {
    const auto a = random_values(static_cast<size_t>(n), 11), b = random_values(n, 12);
    double want = 0;
    for (int64_t j = 0; j < n; ++j) want += double(a[j]) * b[j];
    EXPECT_NEAR(dot_row(isa, a.data(), b.data(), n), want, 1e-5) << n;
    auto dp = b;
    softmax_grad_row(isa, dp.data(), a.data(), n, 0.25f, 3.0f);
    for (int64_t j = 0; j < n; ++j)
      ASSERT_NEAR(dp[j], a[j] * (double(b[j]) - 0.25) * 3.0, 1e-6) << n << " " << j;
  }
}

// Every level's row primitives give the AVX2 level's bits (the attention and the LM head do not
// change with the CPU's vector width): row lengths around the 8- and 16-lane chunks, causal
// rows' typical lengths, scores up to +-30, and a row whose terms underflow to zero.
TEST_P(KernelsCpuBlocksAt, RowsGiveTheAvx2LevelsBits) {
  const CpuIsa isa = GetParam();
  if (isa <= CpuIsa::Avx2) GTEST_SKIP() << "compares the levels above avx2 with avx2";
  auto bits = [](float x) {
    uint32_t u;
    std::memcpy(&u, &x, 4);
    return u;
  };
  std::vector<int64_t> lengths;
  for (int64_t n = 1; n <= 49; ++n) lengths.push_back(n);
  for (int64_t n : {63, 64, 65, 100, 255, 256, 257, 1000}) lengths.push_back(n);
  for (int64_t n : lengths) {
    auto in = random_values(static_cast<size_t>(n), static_cast<uint32_t>(n) + 77);
    for (auto& x : in) x *= 30.0f;
    if (n == 40) in[3] = 500.0f;  // every other term underflows
    auto a = in, b = in;
    const float lse_a = softmax_row(CpuIsa::Avx2, a.data(), n, 0.7f);
    const float lse_b = softmax_row(isa, b.data(), n, 0.7f);
    ASSERT_EQ(bits(lse_a), bits(lse_b)) << "softmax_row lse, n " << n;
    for (int64_t j = 0; j < n; ++j)
      ASSERT_EQ(bits(a[j]), bits(b[j])) << "softmax_row n " << n << " j " << j;
    a = in, b = in;
    exp_shifted_row(CpuIsa::Avx2, a.data(), n, lse_a);
    exp_shifted_row(isa, b.data(), n, lse_a);
    for (int64_t j = 0; j < n; ++j)
      ASSERT_EQ(bits(a[j]), bits(b[j])) << "exp_shifted_row n " << n << " j " << j;
    a = in, b = in;
    ASSERT_EQ(bits(exp_shifted_sum_row(CpuIsa::Avx2, a.data(), n, lse_a)),
              bits(exp_shifted_sum_row(isa, b.data(), n, lse_a)))
        << "exp_shifted_sum_row sum, n " << n;
    for (int64_t j = 0; j < n; ++j)
      ASSERT_EQ(bits(a[j]), bits(b[j])) << "exp_shifted_sum_row n " << n << " j " << j;
    const auto p = random_values(static_cast<size_t>(n), static_cast<uint32_t>(n) + 5);
    a = in, b = in;
    softmax_grad_row(CpuIsa::Avx2, a.data(), p.data(), n, 0.3f, 0.125f);
    softmax_grad_row(isa, b.data(), p.data(), n, 0.3f, 0.125f);
    for (int64_t j = 0; j < n; ++j)
      ASSERT_EQ(bits(a[j]), bits(b[j])) << "softmax_grad_row n " << n << " j " << j;
    ASSERT_EQ(bits(dot_row(CpuIsa::Avx2, in.data(), p.data(), n)),
              bits(dot_row(isa, in.data(), p.data(), n)))
        << "dot_row n " << n;
  }
}

// A row is often the front of a longer buffer (a causal block's row of scores is followed by
// the next row's): the row functions write their n elements and nothing after them, whatever
// n's remainder by the vector width (the last elements are one masked vector from AVX2 up).
TEST_P(KernelsCpuBlocksAt, RowsWriteNothingPastTheirEnd) {
  const CpuIsa isa = GetParam();
  constexpr float kGuard = 1234.5f;
  for (int64_t n = 1; n <= 40; ++n) {
    auto buf = random_values(static_cast<size_t>(n) + 16, static_cast<uint32_t>(n) + 3);
    std::fill(buf.begin() + n, buf.end(), kGuard);
    softmax_row(isa, buf.data(), n, 1.0f);
    for (size_t j = static_cast<size_t>(n); j < buf.size(); ++j)
      ASSERT_EQ(buf[j], kGuard) << "softmax_row n " << n << " wrote element " << j;
    exp_shifted_row(isa, buf.data(), n, 0.5f);
    for (size_t j = static_cast<size_t>(n); j < buf.size(); ++j)
      ASSERT_EQ(buf[j], kGuard) << "exp_shifted_row n " << n << " wrote element " << j;
    exp_shifted_sum_row(isa, buf.data(), n, 0.5f);
    for (size_t j = static_cast<size_t>(n); j < buf.size(); ++j)
      ASSERT_EQ(buf[j], kGuard) << "exp_shifted_sum_row n " << n << " wrote element " << j;
    const auto p = random_values(static_cast<size_t>(n), static_cast<uint32_t>(n) + 9);
    softmax_grad_row(isa, buf.data(), p.data(), n, 0.25f, 2.0f);
    for (size_t j = static_cast<size_t>(n); j < buf.size(); ++j)
      ASSERT_EQ(buf[j], kGuard) << "softmax_grad_row n " << n << " wrote element " << j;
  }
}

INSTANTIATE_TEST_SUITE_P(KernelsCpuBlocks, KernelsCpuBlocksAt, ::testing::ValuesIn(kAllCpuIsas),
                         kernel_test::cpu_isa_test_name);

// The cpuid probe against the kernel's view of the CPU (/proc/cpuinfo lists a feature only
// when the CPU has it and, for AVX and AVX-512, the kernel enabled its registers): each level up
// to avx512_bf16 is detected exactly when all of its flags, and those of the levels below, are
// there. AMX also needs the kernel to grant tile data (Linux 5.16+; older kernels list
// amx_tile all the same), so with the flags present the probe may still refuse it, saying why.
TEST(KernelsCpuBlocks, DetectedLevelMatchesProcCpuinfo) {
#if !defined(__x86_64__)
  GTEST_SKIP() << "not an x86-64 build: every level above scalar is unavailable";
#endif
  std::ifstream in("/proc/cpuinfo");
  std::string line, flags;
  while (flags.empty() && std::getline(in, line))
    if (line.rfind("flags", 0) == 0)
      flags.append(" ").append(line.substr(line.find(':') + 1)).append(" ");
  if (flags.empty()) GTEST_SKIP() << "no /proc/cpuinfo flags line to compare the probe with";
  auto has = [&](const char* f) {
    return flags.find(std::string(" ") + f + " ") != std::string::npos;
  };
  struct Level {
    CpuIsa isa;
    std::vector<const char*> flags;
  };
  const Level levels[] = {{CpuIsa::Avx2, {"avx2", "fma", "f16c"}},
                          {CpuIsa::Avx512, {"avx512f", "avx512dq", "avx512bw", "avx512vl"}},
                          {CpuIsa::Avx512Bf16, {"avx512_bf16"}},
                          {CpuIsa::Amx, {"amx_bf16", "amx_tile"}}};
  CpuIsa listed = CpuIsa::Scalar;
  for (const Level& l : levels) {
    bool all = true;
    for (const char* f : l.flags) all = all && has(f);
    if (!all) break;
    listed = l.isa;
  }
  const CpuIsa detected = cpu_isa_detected();
  if (listed == CpuIsa::Amx && detected == CpuIsa::Avx512Bf16) {
    EXPECT_NE(cpu_isa_missing(CpuIsa::Amx).find("enabled by the OS"), std::string::npos);
  } else {
    EXPECT_EQ(cpu_isa_name(detected), cpu_isa_name(listed)) << "flags:" << flags;
  }
  for (CpuIsa isa : kAllCpuIsas) {
    EXPECT_EQ(cpu_isa_supported(isa), isa <= detected) << cpu_isa_name(isa);
    EXPECT_EQ(cpu_isa_missing(isa).empty(), isa <= detected) << cpu_isa_missing(isa);
  }
}

TEST(KernelsCpuBlocks, LevelNamesRoundTrip) {
  for (CpuIsa isa : kAllCpuIsas) {
    CpuIsa parsed = CpuIsa::Scalar;
    EXPECT_TRUE(parse_cpu_isa(cpu_isa_name(isa), &parsed)) << cpu_isa_name(isa);
    EXPECT_EQ(parsed, isa);
  }
  CpuIsa parsed = CpuIsa::Scalar;
  EXPECT_FALSE(parse_cpu_isa("avx512bf16", &parsed));
  EXPECT_FALSE(parse_cpu_isa("", &parsed));
}

}  // namespace
}  // namespace braid::cpu
