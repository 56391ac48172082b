// Tests of gemm_f32 / gemm_bf16 on every CPU backend against a double-precision reference.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/kernels/cpu/gemm_backends.h"
#include "core/kernels/gemm.h"
#include "kernel_test_util.h"

namespace braid {
namespace {

struct Case {
  int64_t M, N, K;
};
// Odd sizes, degenerate K and M, and one larger than the reference's K block (128).
const Case kCases[] = {{7, 5, 3}, {1, 9, 4}, {6, 4, 1}, {5, 1, 7}, {33, 40, 150}};

// Deterministic values in [-1, 1).
std::vector<float> values(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  for (float& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = static_cast<float>(seed >> 8) / 16777216.0f * 2.0f - 1.0f;
  }
  return v;
}

// Stored operands with padded leading dims; the padding holds NaN so reading it shows.
struct Problem {
  bool ta, tb;
  int64_t M, N, K, lda, ldb, ldc;
  std::vector<float> A, B, C0;  // A: ta ? (K, lda) : (M, lda); B: tb ? (N, ldb) : (K, ldb)
};

Problem make_problem(bool ta, bool tb, const Case& c, bool round_bf16) {
  Problem p{ta, tb, c.M, c.N, c.K, 0, 0, 0, {}, {}, {}};
  p.lda = (ta ? c.M : c.K) + 3;
  p.ldb = (tb ? c.K : c.N) + 2;
  p.ldc = c.N + 5;
  const int64_t rows_a = ta ? c.K : c.M, rows_b = tb ? c.N : c.K;
  p.A = values(static_cast<size_t>(rows_a * p.lda), 1);
  p.B = values(static_cast<size_t>(rows_b * p.ldb), 2);
  p.C0 = values(static_cast<size_t>(c.M * p.ldc), 3);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t r = 0; r < rows_a; ++r)
    for (int64_t k = ta ? c.M : c.K; k < p.lda; ++k) p.A[r * p.lda + k] = nan;
  for (int64_t r = 0; r < rows_b; ++r)
    for (int64_t k = tb ? c.K : c.N; k < p.ldb; ++k) p.B[r * p.ldb + k] = nan;
  if (round_bf16) {
    for (float& x : p.A) x = bf16_to_float(float_to_bf16(x));
    for (float& x : p.B) x = bf16_to_float(float_to_bf16(x));
  }
  return p;
}

// Expected C in double; beta == 0 ignores C0 entirely.
std::vector<double> expected(const Problem& p, float alpha, float beta) {
  std::vector<double> out(static_cast<size_t>(p.M * p.N));
  for (int64_t i = 0; i < p.M; ++i)
    for (int64_t j = 0; j < p.N; ++j) {
      double acc = 0.0;
      for (int64_t k = 0; k < p.K; ++k) {
        const double a = p.ta ? p.A[k * p.lda + i] : p.A[i * p.lda + k];
        const double b = p.tb ? p.B[j * p.ldb + k] : p.B[k * p.ldb + j];
        acc += a * b;
      }
      const double c0 = beta == 0.0f ? 0.0 : static_cast<double>(beta) * p.C0[i * p.ldc + j];
      out[i * p.N + j] = alpha * acc + c0;
    }
  return out;
}

// Checks the (M, N) result and that C's padding columns are untouched.
void check_result(const Problem& p, const std::vector<float>& C, const std::vector<float>& C_init,
                  float alpha, float beta, const std::string& what) {
  const std::vector<double> ref = expected(p, alpha, beta);
  int wrong = 0;
  for (int64_t i = 0; i < p.M; ++i) {
    for (int64_t j = 0; j < p.ldc; ++j) {
      const float got = C[i * p.ldc + j];
      if (j >= p.N) {
        wrong += !(got == C_init[i * p.ldc + j] ||
                   (std::isnan(got) && std::isnan(C_init[i * p.ldc + j])));
        continue;
      }
      const double want = ref[i * p.N + j];
      const double tol = 1e-5 * static_cast<double>(p.K) + 1e-5 * std::fabs(want);
      if (!(std::fabs(got - want) <= tol)) {
        if (wrong < 3)
          ADD_FAILURE() << what << " C(" << i << "," << j << ") = " << got << ", want " << want;
        ++wrong;
      }
    }
  }
  EXPECT_EQ(wrong, 0) << what;
}

std::string describe(const char* kind, GemmBackend b, const Problem& p, float alpha, float beta) {
  return std::string(kind) + " " + std::string(gemm_backend_label(b)) +
         " ta=" + std::to_string(p.ta) + " tb=" + std::to_string(p.tb) +
         " MNK=" + std::to_string(p.M) + "," + std::to_string(p.N) + "," + std::to_string(p.K) +
         " alpha=" + std::to_string(alpha) + " beta=" + std::to_string(beta);
}

// (alpha, beta) pairs: plain, accumulate, and general scaling.
const float kScales[][2] = {{1.0f, 0.0f}, {1.0f, 1.0f}, {0.5f, -2.0f}};

std::vector<float> initial_c(const Problem& p, float beta) {
  std::vector<float> C = p.C0;
  if (beta == 0.0f)  // garbage that must not leak into the result
    for (int64_t i = 0; i < p.M; ++i)
      for (int64_t j = 0; j < p.N; ++j) C[i * p.ldc + j] = std::numeric_limits<float>::quiet_NaN();
  return C;
}

TEST(GemmTest, F32EveryBackendTransposeAndScale) {
  for (GemmBackend b : kAllGemmBackends)
    for (int t = 0; t < 4; ++t)
      for (const Case& c : kCases)
        for (const auto& s : kScales) {
          const Problem p = make_problem(t & 1, t & 2, c, false);
          std::vector<float> C = initial_c(p, s[1]);
          const std::vector<float> C_init = C;
          gemm_f32_with(b, p.ta, p.tb, p.M, p.N, p.K, s[0], p.A.data(), p.lda, p.B.data(), p.ldb,
                        s[1], C.data(), p.ldc);
          check_result(p, C, C_init, s[0], s[1], describe("f32", b, p, s[0], s[1]));
        }
}

TEST(GemmTest, Bf16EveryBackendAndModeAgainstRoundedInputs) {
  for (GemmBackend b : kAllGemmBackends)
    for (Bf16Mode mode : {Bf16Mode::Native, Bf16Mode::Widen})
      for (int t = 0; t < 4; ++t)
        for (const Case& c : kCases)
          for (const auto& s : kScales) {
            const Problem p = make_problem(t & 1, t & 2, c, true);
            std::vector<bf16> A(p.A.size()), B(p.B.size());
            for (size_t i = 0; i < A.size(); ++i) A[i] = float_to_bf16(p.A[i]);
            for (size_t i = 0; i < B.size(); ++i) B[i] = float_to_bf16(p.B[i]);
            std::vector<float> C = initial_c(p, s[1]);
            const std::vector<float> C_init = C;
            gemm_bf16_with(b, mode, p.ta, p.tb, p.M, p.N, p.K, s[0], A.data(), p.lda, B.data(),
                           p.ldb, s[1], C.data(), p.ldc);
            const char* kind = mode == Bf16Mode::Native ? "bf16-native" : "bf16-widen";
            check_result(p, C, C_init, s[0], s[1], describe(kind, b, p, s[0], s[1]));
          }
}

// The plumbing of oneDNN's bf16 matmul (strides, alpha, beta) in f32, which every CPU has.
TEST(GemmTest, OneDnnMatmulPrimitiveLayoutAndScales) {
  for (int t = 0; t < 4; ++t)
    for (const Case& c : kCases)
      for (const auto& s : kScales) {
        const Problem p = make_problem(t & 1, t & 2, c, false);
        std::vector<float> C = initial_c(p, s[1]);
        const std::vector<float> C_init = C;
        for (int rep = 0; rep < 2; ++rep) {  // the second call hits the primitive cache
          C = C_init;
          gemm_f32_onednn_matmul(p.ta, p.tb, p.M, p.N, p.K, s[0], p.A.data(), p.lda, p.B.data(),
                                 p.ldb, s[1], C.data(), p.ldc);
        }
        check_result(p, C, C_init, s[0], s[1],
                     describe("matmul", GemmBackend::OneDnn, p, s[0], s[1]));
      }
}

TEST(GemmTest, ZeroKScalesC) {
  for (GemmBackend b : kAllGemmBackends) {
    std::vector<float> C = {1.0f, 2.0f, std::numeric_limits<float>::quiet_NaN(), 4.0f};
    gemm_f32_with(b, false, false, 2, 2, 0, 1.0f, nullptr, 1, nullptr, 2, 0.0f, C.data(), 2);
    EXPECT_EQ(C, (std::vector<float>{0.0f, 0.0f, 0.0f, 0.0f})) << gemm_backend_label(b);
    C = {1.0f, 2.0f, 3.0f, 4.0f};
    gemm_f32_with(b, false, false, 2, 2, 0, 1.0f, nullptr, 1, nullptr, 2, 2.0f, C.data(), 2);
    EXPECT_EQ(C, (std::vector<float>{2.0f, 4.0f, 6.0f, 8.0f})) << gemm_backend_label(b);
  }
}

// The attention kernel calls gemm_f32 per block from inside a parallel region.
TEST(GemmTest, PublicCallsInsideOmpParallelRegion) {
  const Case c{20, 12, 16};
  const int nthr = 2;
  std::vector<Problem> probs;
  for (int t = 0; t < nthr; ++t) probs.push_back(make_problem(t & 1, true, c, true));
  std::vector<std::vector<float>> out32(nthr), out16(nthr);
#pragma omp parallel num_threads(nthr)
  {
    const int t = omp_get_thread_num();
    const Problem& p = probs[t];
    out32[t] = initial_c(p, 0.0f);
    out16[t] = initial_c(p, 0.0f);
    std::vector<bf16> A(p.A.size()), B(p.B.size());
    for (size_t i = 0; i < A.size(); ++i) A[i] = float_to_bf16(p.A[i]);
    for (size_t i = 0; i < B.size(); ++i) B[i] = float_to_bf16(p.B[i]);
    for (int rep = 0; rep < 10; ++rep) {
      gemm_f32(test_ctx(), p.ta, p.tb, p.M, p.N, p.K, 1.0f, p.A.data(), p.lda, p.B.data(), p.ldb, 0.0f,
               out32[t].data(), p.ldc);
      gemm_bf16(test_ctx(), p.ta, p.tb, p.M, p.N, p.K, 1.0f, A.data(), p.lda, B.data(), p.ldb, 0.0f,
                out16[t].data(), p.ldc);
    }
  }
  for (int t = 0; t < nthr; ++t) {
    const std::vector<float> init = initial_c(probs[t], 0.0f);
    check_result(probs[t], out32[t], init, 1.0f, 0.0f,
                 "f32 in region, thread " + std::to_string(t));
    check_result(probs[t], out16[t], init, 1.0f, 0.0f,
                 "bf16 in region, thread " + std::to_string(t));
  }
}

TEST(GemmTest, BackendNamesAndPlan) {
  GemmBackend b = GemmBackend::Reference;
  EXPECT_TRUE(parse_gemm_backend("openblas", &b));
  EXPECT_EQ(b, GemmBackend::OpenBlas);
  EXPECT_FALSE(parse_gemm_backend("mkl", &b));
  for (GemmBackend backend : kAllGemmBackends) {
    const GemmPlan plan = default_gemm_plan(backend);
    GemmBackend running{};
    EXPECT_TRUE(parse_gemm_backend(gemm_backend_name(plan), &running)) << gemm_backend_name(plan);
    EXPECT_EQ(running, backend);
    // Native bf16 is planned only where the library has it (else gemm_bf16 would widen anyway).
    if (plan.bf16_mode == Bf16Mode::Native) {
      EXPECT_TRUE(native_bf16_available(running));
    }
  }
}

TEST(GemmTest, MeasurePeakIsPositive) {
  const double flops = measure_gemm_peak_f32(test_ctx(), 0.0);
  EXPECT_GT(flops, 1e8);
  EXPECT_LT(flops, 1e15);
}

}  // namespace
}  // namespace braid
