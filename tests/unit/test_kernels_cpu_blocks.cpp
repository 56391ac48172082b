// CPU building blocks of attention/cross-entropy: small_gemm edge tiles and strided A, the
// fast exps and softmax rows.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/kernels/cpu/fast_math.h"
#include "core/kernels/cpu/small_gemm.h"
#include "core/kernels/cpu/vec_math.h"

namespace braid::cpu {
namespace {

std::vector<float> random_values(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

TEST(KernelsCpuBlocks, SmallGemmMatchesNaiveOnEdgeShapes) {
  uint32_t seed = 1;
  for (int64_t M : {1, 5, 6, 7, 13})
    for (int64_t N : {1, 8, 9, 16, 23, 33})
      for (int64_t K : {0, 1, 6, 17})
        for (bool transposed_a : {false, true})
          for (bool accumulate : {false, true}) {
            // A stored (M, K) with row stride K + 3, or (K, M) with row stride M + 2.
            const int64_t a_rs = transposed_a ? 1 : K + 3, a_cs = transposed_a ? M + 2 : 1;
            const int64_t ldb = N + 5, ldc = N + 4;
            const auto a = random_values(static_cast<size_t>((transposed_a ? K : M) *
                                                             (transposed_a ? M + 2 : K + 3)) + 1,
                                         ++seed);
            const auto b = random_values(static_cast<size_t>(K * ldb) + 1, ++seed);
            auto c = random_values(static_cast<size_t>(M * ldc), ++seed);
            const auto c0 = c;
            if (!accumulate)  // without accumulate C must not be read
              for (int64_t i = 0; i < M; ++i)
                for (int64_t j = 0; j < N; ++j) c[i * ldc + j] = NAN;
            small_gemm(M, N, K, 0.5f, a.data(), a_rs, a_cs, b.data(), ldb, accumulate, c.data(),
                       ldc);
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
TEST(KernelsCpuBlocks, NanInputsStayNanWithoutUndefinedBehaviour) {
  volatile float nan_in = NAN;
  EXPECT_TRUE(std::isnan(exp_approx(nan_in)));
  EXPECT_TRUE(std::isnan(exp_f32(nan_in)));
  std::vector<float> row(19, 0.5f);
  row[3] = nan_in;
  softmax_row(row.data(), static_cast<int64_t>(row.size()), 1.0f);
  EXPECT_TRUE(std::isnan(row[0]));
}

TEST(KernelsCpuBlocks, SoftmaxRowsMatchDouble) {
  for (int64_t n : {1, 7, 8, 16, 31, 100}) {
    auto s = random_values(static_cast<size_t>(n), static_cast<uint32_t>(n));
    for (auto& x : s) x *= 30.0f;
    const auto in = s;
    double m = -1e300, sum = 0;
    for (float x : in) m = std::max(m, double(x));
    for (float x : in) sum += std::exp(x - m);
    const float lse = softmax_row(s.data(), n, 2.0f);
    EXPECT_NEAR(lse, m + std::log(sum), 1e-5 * std::abs(m) + 1e-6) << n;
    for (int64_t j = 0; j < n; ++j) {
      ASSERT_NEAR(s[j], 2.0 * std::exp(in[j] - m) / sum, 1e-6) << n << " " << j;
      s[j] = in[j];
    }
    exp_shifted_row(s.data(), n, lse);
    for (int64_t j = 0; j < n; ++j) ASSERT_NEAR(s[j], std::exp(in[j] - m) / sum, 1e-6);
  }
}

}  // namespace
}  // namespace braid::cpu
