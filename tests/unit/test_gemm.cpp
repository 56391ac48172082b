// Tests of gemm_f32 / gemm_bf16 / gemm_f16 on every CPU backend, bf16 mode and instruction-set
// level this CPU allows, against a double-precision reference; the rest skip naming what is
// missing.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <thread>
#include <tuple>
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
          gemm_f32_with(test_ctx(), b, p.ta, p.tb, p.M, p.N, p.K, s[0], p.A.data(), p.lda,
                        p.B.data(), p.ldb, s[1], C.data(), p.ldc);
          check_result(p, C, C_init, s[0], s[1], describe("f32", b, p, s[0], s[1]));
        }
}

// gemm_f32_bias (a linear layer's forward) on every backend: C = op(A) op(B) + bias with C's
// old contents (NaN) never read, padding untouched, K = 0 giving the bias; where the bias is
// not fused (every backend but oneDNN on AVX-512) the bits of the bias written first and
// gemm_f32 adding onto it. Also inside an OpenMP region (a call on one thread).
TEST(GemmTest, F32BiasEveryBackend) {
  for (GemmBackend b : kAllGemmBackends) {
    ExecOptions o;
    o.gemm = GemmPlan{b, Bf16Mode::Widen};
    ExecContext ctx(o);
    const bool fused = b == GemmBackend::OneDnn && onednn_f32_bias_fused();
    std::vector<Case> cases(std::begin(kCases), std::end(kCases));
    cases.push_back({4, 6, 0});
    for (int t = 0; t < 4; ++t)
      for (const Case& c : cases)
        for (bool in_region : {false, true}) {
          Problem p = make_problem(t & 1, t & 2, c, false);
          const std::vector<float> bias = values(static_cast<size_t>(p.N), 5);
          std::vector<float> C = initial_c(p, 0.0f);
          const std::vector<float> C_init = C;
          if (in_region) {
#pragma omp parallel num_threads(2)
            if (omp_get_thread_num() == 0)
              gemm_f32_bias(ctx, p.ta, p.tb, p.M, p.N, p.K, p.A.data(), p.lda, p.B.data(), p.ldb,
                            bias.data(), C.data(), p.ldc);
          } else {
            gemm_f32_bias(ctx, p.ta, p.tb, p.M, p.N, p.K, p.A.data(), p.lda, p.B.data(), p.ldb,
                          bias.data(), C.data(), p.ldc);
          }
          // The reference: C0 := bias rows, then beta 1.
          for (int64_t i = 0; i < p.M; ++i)
            for (int64_t j = 0; j < p.N; ++j) p.C0[i * p.ldc + j] = bias[j];
          const std::string what =
              describe("f32 bias", b, p, 1.0f, 1.0f) + (in_region ? " in a region" : "");
          check_result(p, C, C_init, 1.0f, 1.0f, what);
          if (fused && !in_region && p.K > 0) continue;
          // The same way (on one thread inside a region): a library's sums may depend on its
          // thread count.
          std::vector<float> staged = p.C0;
          auto stage = [&] {
            gemm_f32_with(ctx, b, p.ta, p.tb, p.M, p.N, p.K, 1.0f, p.A.data(), p.lda, p.B.data(),
                          p.ldb, 1.0f, staged.data(), p.ldc);
          };
          if (in_region) {
#pragma omp parallel num_threads(2)
            if (omp_get_thread_num() == 0) stage();
          } else {
            stage();
          }
          for (int64_t i = 0; i < p.M; ++i)
            for (int64_t j = 0; j < p.N; ++j)
              ASSERT_EQ(C[i * p.ldc + j], staged[i * p.ldc + j]) << what << " at " << i << "," << j;
        }
  }
}

// One (backend, bf16 mode) pair per test, so that a native kernel the library lacks here
// skips by itself, saying why, instead of silently widening.
class GemmBf16 : public ::testing::TestWithParam<std::tuple<GemmBackend, Bf16Mode>> {};

TEST_P(GemmBf16, AgainstRoundedInputs) {
  const auto [b, mode] = GetParam();
  if (mode == Bf16Mode::Native && !native_bf16_available(b))
    GTEST_SKIP() << "no native bf16 kernel: " << native_bf16_missing(b);
  for (int t = 0; t < 4; ++t)
    for (const Case& c : kCases)
      for (const auto& s : kScales) {
        const Problem p = make_problem(t & 1, t & 2, c, true);
        std::vector<bf16> A(p.A.size()), B(p.B.size());
        for (size_t i = 0; i < A.size(); ++i) A[i] = float_to_bf16(p.A[i]);
        for (size_t i = 0; i < B.size(); ++i) B[i] = float_to_bf16(p.B[i]);
        std::vector<float> C = initial_c(p, s[1]);
        const std::vector<float> C_init = C;
        gemm_bf16_with(test_ctx(), b, mode, p.ta, p.tb, p.M, p.N, p.K, s[0], A.data(), p.lda,
                       B.data(), p.ldb, s[1], C.data(), p.ldc);
        const char* kind = mode == Bf16Mode::Native ? "bf16-native" : "bf16-widen";
        check_result(p, C, C_init, s[0], s[1], describe(kind, b, p, s[0], s[1]));
      }
}

INSTANTIATE_TEST_SUITE_P(GemmBf16, GemmBf16,
                         ::testing::Combine(::testing::ValuesIn(kAllGemmBackends),
                                            ::testing::Values(Bf16Mode::Native, Bf16Mode::Widen)),
                         [](const ::testing::TestParamInfo<GemmBf16::ParamType>& info) {
                           return std::string(gemm_backend_label(std::get<0>(info.param))) +
                                  (std::get<1>(info.param) == Bf16Mode::Native ? "_native"
                                                                               : "_widen");
                         });

// The plumbing of oneDNN's bf16 matmul (strides, alpha, beta) in f32, which every CPU has.
TEST(GemmTest, OneDnnMatmulPrimitiveLayoutAndScales) {
  for (int t = 0; t < 4; ++t)
    for (const Case& c : kCases)
      for (const auto& s : kScales) {
        const Problem p = make_problem(t & 1, t & 2, c, false);
        std::vector<float> C = initial_c(p, s[1]);
        const std::vector<float> C_init = C;
        GemmScratch scratch;
        for (int rep = 0; rep < 2; ++rep) {  // the second call hits the primitive cache
          C = C_init;
          gemm_f32_onednn_matmul(scratch, p.ta, p.tb, p.M, p.N, p.K, s[0], p.A.data(), p.lda,
                                 p.B.data(), p.ldb, s[1], C.data(), p.ldc);
          EXPECT_EQ(onednn_cached_matmuls(scratch), 1u) << "call " << rep;
        }
        check_result(p, C, C_init, s[0], s[1],
                     describe("matmul", GemmBackend::OneDnn, p, s[0], s[1]));
      }
}

// gemm_bf16 on oneDNN runs some long inner dimensions in slices on AMX CPUs
// (onednn_bf16_k_slice, gemm_bf16_onednn_sliced): the sum over slices (the last one shorter)
// matches the reference in every layout and (alpha, beta) with padded leading dimensions; the
// slices the rule picks cover K in steps of 32 and are never shorter than 512; layouts and
// shapes the rule leaves alone run as one call; and the public call on a sliced shape is right.
TEST(GemmTest, Bf16InnerDimensionSlices) {
  if (!native_bf16_available(GemmBackend::OneDnn))
    GTEST_SKIP() << "no native bf16 kernel: " << native_bf16_missing(GemmBackend::OneDnn);
  for (int t = 0; t < 4; ++t) {
    const Problem p = make_problem(t & 1, t & 2, Case{40, 24, 2100}, true);
    std::vector<bf16> A(p.A.size()), B(p.B.size());
    for (size_t i = 0; i < A.size(); ++i) A[i] = float_to_bf16(p.A[i]);
    for (size_t i = 0; i < B.size(); ++i) B[i] = float_to_bf16(p.B[i]);
    GemmScratch scratch;
    for (const auto& s : kScales) {
      std::vector<float> C = initial_c(p, s[1]);
      const std::vector<float> C_init = C;
      gemm_bf16_onednn_sliced(scratch, 1000, p.ta, p.tb, p.M, p.N, p.K, s[0], A.data(), p.lda,
                              B.data(), p.ldb, s[1], C.data(), p.ldc);
      check_result(p, C, C_init, s[0], s[1],
                   describe("bf16 in slices of 1000", GemmBackend::OneDnn, p, s[0], s[1]));
    }
  }
  for (const auto& [ta, M, N, K] :
       {std::tuple<bool, int64_t, int64_t, int64_t>{false, 512, 768, 50304},
        {false, 512, 24, 8200},
        {true, 2048, 512, 2048},
        {true, 1536, 512, 1100}}) {
    const int64_t slice = onednn_bf16_k_slice(ta, false, M, N, K);
    ASSERT_GT(slice, 0);
    if (slice < K) {
      EXPECT_EQ(slice % 32, 0) << M << "x" << N << "x" << K;
      EXPECT_GE(slice, 512) << M << "x" << N << "x" << K;
    }
    std::printf("gemm_bf16 %c N %lldx%lldx%lld: %lld slice(s) here\n", ta ? 'T' : 'N',
                static_cast<long long>(M), static_cast<long long>(N), static_cast<long long>(K),
                static_cast<long long>((K + slice - 1) / slice));
  }
  EXPECT_EQ(onednn_bf16_k_slice(false, true, 512, 768, 50304), 50304);   // B transposed
  EXPECT_EQ(onednn_bf16_k_slice(false, false, 256, 768, 50304), 50304);  // few rows
  EXPECT_EQ(onednn_bf16_k_slice(false, false, 512, 768, 4096), 4096);    // short K
  EXPECT_EQ(onednn_bf16_k_slice(true, false, 64, 2048, 4096), 4096);     // narrow weight gradient
  EXPECT_EQ(onednn_bf16_k_slice(true, false, 1024, 256, 4096), 4096);

  ExecOptions o;
  o.gemm = GemmPlan{GemmBackend::OneDnn, Bf16Mode::Native};
  ExecContext ctx(o);
  const Problem p = make_problem(false, false, Case{512, 24, 8200}, true);
  std::vector<bf16> A(p.A.size()), B(p.B.size());
  for (size_t i = 0; i < A.size(); ++i) A[i] = float_to_bf16(p.A[i]);
  for (size_t i = 0; i < B.size(); ++i) B[i] = float_to_bf16(p.B[i]);
  std::vector<float> C = initial_c(p, -2.0f);
  const std::vector<float> C_init = C;
  gemm_bf16(ctx, false, false, p.M, p.N, p.K, 0.5f, A.data(), p.lda, B.data(), p.ldb, -2.0f,
            C.data(), p.ldc);
  check_result(p, C, C_init, 0.5f, -2.0f,
               describe("bf16-native", GemmBackend::OneDnn, p, 0.5f, -2.0f));
}

// The weight-gradient layout at sizes where gemm_f32 on oneDNN takes the matmul primitive on
// AVX-512 CPUs (onednn_f32_matmul_preferred): the public entry point, padded leading dims,
// every (alpha, beta), and the same bits at one and two threads.
TEST(GemmTest, F32WeightGradientLayoutThroughThePublicCall) {
  for (const Case c : {Case{1024, 24, 1030}, Case{1030, 40, 300}}) {
    const Problem p = make_problem(true, false, c, false);
    ExecContext ctx;
    for (const auto& s : kScales) {
      std::vector<float> C = initial_c(p, s[1]);
      const std::vector<float> C_init = C;
      gemm_f32(ctx, true, false, p.M, p.N, p.K, s[0], p.A.data(), p.lda, p.B.data(), p.ldb, s[1],
               C.data(), p.ldc);
      check_result(p, C, C_init, s[0], s[1], describe("f32", ctx.gemm().backend, p, s[0], s[1]));
      std::vector<float> C1 = C_init;
      const int threads = omp_get_max_threads();
      omp_set_num_threads(1);
      gemm_f32(ctx, true, false, p.M, p.N, p.K, s[0], p.A.data(), p.lda, p.B.data(), p.ldb, s[1],
               C1.data(), p.ldc);
      omp_set_num_threads(threads);
      EXPECT_EQ(0, std::memcmp(C.data(), C1.data(), C.size() * sizeof(float)))
          << "one thread and " << threads << " differ; alpha " << s[0] << " beta " << s[1];
    }
    std::printf("gemm_f32 %s for this layout here (K %lld)\n",
                onednn_f32_matmul_preferred(true, false, c.M, c.N, c.K)
                    ? "takes oneDNN's matmul primitive"
                    : "takes dnnl_sgemm",
                static_cast<long long>(c.K));
  }
}

TEST(GemmTest, ZeroKScalesC) {
  for (GemmBackend b : kAllGemmBackends) {
    std::vector<float> C = {1.0f, 2.0f, std::numeric_limits<float>::quiet_NaN(), 4.0f};
    gemm_f32_with(test_ctx(), b, false, false, 2, 2, 0, 1.0f, nullptr, 1, nullptr, 2, 0.0f,
                  C.data(), 2);
    EXPECT_EQ(C, (std::vector<float>{0.0f, 0.0f, 0.0f, 0.0f})) << gemm_backend_label(b);
    C = {1.0f, 2.0f, 3.0f, 4.0f};
    gemm_f32_with(test_ctx(), b, false, false, 2, 2, 0, 1.0f, nullptr, 1, nullptr, 2, 2.0f,
                  C.data(), 2);
    EXPECT_EQ(C, (std::vector<float>{2.0f, 4.0f, 6.0f, 8.0f})) << gemm_backend_label(b);
  }
}

// A kernel may call the GEMMs from inside a parallel region: each thread leases its own slot
// of the context's workspace (widening buffers, oneDNN primitives), never more slots than
// threads.
TEST(GemmTest, PublicCallsInsideOmpParallelRegion) {
  const Case c{20, 12, 16};
  const int nthr = 2;
  ExecContext ctx;
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
      gemm_f32(ctx, p.ta, p.tb, p.M, p.N, p.K, 1.0f, p.A.data(), p.lda, p.B.data(), p.ldb, 0.0f,
               out32[t].data(), p.ldc);
      gemm_bf16(ctx, p.ta, p.tb, p.M, p.N, p.K, 1.0f, A.data(), p.lda, B.data(), p.ldb, 0.0f,
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
  EXPECT_GE(ctx.gemm_workspace().slots(), 1u);
  EXPECT_LE(ctx.gemm_workspace().slots(), static_cast<size_t>(nthr));
}

// The workspace is the context's: GEMMs on one context leave another's untouched, and two
// contexts used from two threads at once give the same bits as each alone.
TEST(GemmTest, WorkspaceBelongsToItsContext) {
  const Problem p = make_problem(false, true, Case{33, 40, 150}, true);
  std::vector<bf16> A(p.A.size()), B(p.B.size());
  std::vector<f16> A16(p.A.size()), B16(p.B.size());
  for (size_t i = 0; i < A.size(); ++i) A[i] = float_to_bf16(p.A[i]);
  for (size_t i = 0; i < B.size(); ++i) B[i] = float_to_bf16(p.B[i]);
  for (size_t i = 0; i < A.size(); ++i) A16[i] = float_to_f16(p.A[i]);
  for (size_t i = 0; i < B.size(); ++i) B16[i] = float_to_f16(p.B[i]);
  // Every path that keeps something in the workspace, one at a time: widened bf16, native
  // bf16 (oneDNN's primitives) where this CPU has it, and f16 (always widened).
  enum class Path { Bf16Widen, Bf16Native, F16 };
  std::vector<Path> paths = {Path::Bf16Widen, Path::F16};
  if (native_bf16_available(GemmBackend::OneDnn)) paths.push_back(Path::Bf16Native);
  for (Path path : paths) {
    SCOPED_TRACE(path == Path::Bf16Widen ? "bf16 widen"
                 : path == Path::F16     ? "f16"
                                         : "bf16 native");
    ExecOptions o;
    o.gemm = GemmPlan{GemmBackend::OneDnn,
                      path == Path::Bf16Native ? Bf16Mode::Native : Bf16Mode::Widen};
    auto run = [&](ExecContext& ctx, std::vector<float>& C) {
      C = initial_c(p, 0.0f);
      for (int rep = 0; rep < 20; ++rep) {
        if (path == Path::F16)
          gemm_f16(ctx, p.ta, p.tb, p.M, p.N, p.K, 1.0f, A16.data(), p.lda, B16.data(), p.ldb, 0.0f,
                   C.data(), p.ldc);
        else
          gemm_bf16(ctx, p.ta, p.tb, p.M, p.N, p.K, 1.0f, A.data(), p.lda, B.data(), p.ldb, 0.0f,
                    C.data(), p.ldc);
      }
    };
    ExecContext alone(o), a(o), b(o), unused(o);
    std::vector<float> want, got_a, got_b;
    run(alone, want);
    EXPECT_EQ(alone.gemm_workspace().slots(), 1u);  // sequential calls reuse one slot
    std::thread ta([&] { run(a, got_a); });
    std::thread tb([&] { run(b, got_b); });
    ta.join();
    tb.join();
    EXPECT_EQ(got_a, want);  // bit for bit, although both ran at the same time
    EXPECT_EQ(got_b, want);
    EXPECT_EQ(a.gemm_workspace().slots(), 1u);
    EXPECT_EQ(b.gemm_workspace().slots(), 1u);
    EXPECT_EQ(unused.gemm_workspace().slots(), 0u);
  }
}

TEST(GemmTest, BackendNames) {
  GemmBackend b = GemmBackend::Reference;
  EXPECT_TRUE(parse_gemm_backend("openblas", &b));
  EXPECT_EQ(b, GemmBackend::OpenBlas);
  EXPECT_FALSE(parse_gemm_backend("mkl", &b));
  for (GemmBackend backend : kAllGemmBackends) {
    GemmBackend running{};
    const GemmPlan plan = default_gemm_plan(backend, cpu_isa_detected());
    EXPECT_TRUE(parse_gemm_backend(gemm_backend_name(plan), &running)) << gemm_backend_name(plan);
    EXPECT_EQ(running, backend);
  }
}

// The default plan at every level this CPU has: native bf16 exactly where the level has bf16
// dot products and that backend has a bf16 kernel of its own (each backend asked about itself:
// an AVX512_BF16/AMX CPU whose OpenBLAS lacks sbgemm must plan widening for OpenBLAS).
TEST(GemmTest, DefaultPlanAtEveryLevel) {
  for (CpuIsa isa : kAllCpuIsas) {
    if (!cpu_isa_supported(isa)) continue;  // GemmAtLevel says which levels skip, and why
    for (GemmBackend backend : kAllGemmBackends) {
      const GemmPlan plan = default_gemm_plan(backend, isa);
      SCOPED_TRACE(std::string(gemm_backend_label(backend)) + " at " +
                   std::string(cpu_isa_name(isa)));
      EXPECT_EQ(plan.backend, backend);
      bool want_native = true;
      if (backend != GemmBackend::Reference) {
        want_native = isa >= CpuIsa::Avx512Bf16 && native_bf16_available(backend);
        if (backend == GemmBackend::OneDnn) want_native = want_native && onednn_has_native_bf16();
      }
      EXPECT_EQ(plan.bf16_mode == Bf16Mode::Native, want_native);
      // Native is planned only where the library has it (else gemm_bf16 would widen anyway).
      if (plan.bf16_mode == Bf16Mode::Native) {
        EXPECT_TRUE(native_bf16_available(backend)) << native_bf16_missing(backend);
      }
    }
  }
}

// One instruction-set level per test: a context at that level runs its default plan's bf16
// path (native or widened) and its f16 widening (the conversion path of the level) correctly.
class GemmAtLevel : public kernel_test::AtCpuIsa {};

TEST_P(GemmAtLevel, DefaultPlanRunsBf16AndF16) {
  const CpuIsa isa = GetParam();
  ExecContext& ctx = this->ctx();
  EXPECT_EQ(ctx.cpu_isa(), isa);
  EXPECT_EQ(ctx.gemm().bf16_mode, default_gemm_plan(GemmBackend::OneDnn, isa).bf16_mode);
  // The log line says which bf16 GEMM runs and, when widened, why.
  const std::string desc = gemm_bf16_description(ctx);
  if (ctx.gemm().bf16_mode == Bf16Mode::Native) {
    EXPECT_NE(desc.find("native (onednn"), std::string::npos) << desc;
  } else {
    EXPECT_NE(desc.find("widened"), std::string::npos) << desc;
    // The first reason that holds: the library's own kernel missing (oneDNN's effective ISA
    // may be capped by ONEDNN_MAX_CPU_ISA), then the CPU, then the context's cap.
    std::string why;
    if (!native_bf16_available(GemmBackend::OneDnn))
      why = native_bf16_missing(GemmBackend::OneDnn);
    else if (isa < CpuIsa::Avx512Bf16)
      why = isa == cpu_isa_detected() ? std::string("this CPU has no")
                                      : "capped at " + std::string(cpu_isa_name(isa));
    if (!why.empty()) {
      EXPECT_NE(desc.find(why), std::string::npos) << desc;
    }
  }
  for (int t = 0; t < 4; ++t)
    for (const Case& c : kCases) {
      Problem p = make_problem(t & 1, t & 2, c, true);
      std::vector<bf16> A(p.A.size()), B(p.B.size());
      for (size_t i = 0; i < A.size(); ++i) A[i] = float_to_bf16(p.A[i]);
      for (size_t i = 0; i < B.size(); ++i) B[i] = float_to_bf16(p.B[i]);
      std::vector<float> C = initial_c(p, 1.0f);
      const std::vector<float> C_init = C;
      gemm_bf16(ctx, p.ta, p.tb, p.M, p.N, p.K, 0.5f, A.data(), p.lda, B.data(), p.ldb, 1.0f,
                C.data(), p.ldc);
      check_result(p, C, C_init, 0.5f, 1.0f, describe("bf16", GemmBackend::OneDnn, p, 0.5f, 1.0f));
      // f16: values rounded to f16 (bf16-rounded values in [-1, 1) are exact in f16 but for
      // the smallest magnitudes, so round again through f16).
      std::vector<f16> A16(p.A.size()), B16(p.B.size());
      for (size_t i = 0; i < A16.size(); ++i) p.A[i] = f16_to_float(A16[i] = float_to_f16(p.A[i]));
      for (size_t i = 0; i < B16.size(); ++i) p.B[i] = f16_to_float(B16[i] = float_to_f16(p.B[i]));
      C = C_init;
      gemm_f16(ctx, p.ta, p.tb, p.M, p.N, p.K, 0.5f, A16.data(), p.lda, B16.data(), p.ldb, 1.0f,
               C.data(), p.ldc);
      check_result(p, C, C_init, 0.5f, 1.0f, describe("f16", GemmBackend::OneDnn, p, 0.5f, 1.0f));
    }
}

// gemm_bf16_to_bf16 at each level: native (oneDNN writes bf16 C, bias fused) where the plan is
// native, staged otherwise. Either way C is the f32 sum rounded once: within half a bf16 unit
// of the exact value plus the f32 summation error; padding columns untouched. On a staged plan
// the bits equal gemm_bf16's f32 result (bias first, then the GEMM onto it) narrowed.
TEST_P(GemmAtLevel, Bf16OutputBiasAndAccumulate) {
  ExecContext& ctx = this->ctx();
  const bool native = ctx.gemm().bf16_mode == Bf16Mode::Native &&
                      ctx.gemm().backend == GemmBackend::OneDnn &&
                      native_bf16_available(GemmBackend::OneDnn);
  for (int t = 0; t < 4; ++t)
    for (const Case& c : kCases)
      for (int mode = 0; mode < 3; ++mode) {  // 0: plain, 1: bias, 2: accumulate
        const bool with_bias = mode == 1, accumulate = mode == 2;
        Problem p = make_problem(t & 1, t & 2, c, true);
        std::vector<bf16> A(p.A.size()), B(p.B.size()), C(p.C0.size());
        for (size_t i = 0; i < A.size(); ++i) A[i] = float_to_bf16(p.A[i]);
        for (size_t i = 0; i < B.size(); ++i) B[i] = float_to_bf16(p.B[i]);
        for (size_t i = 0; i < C.size(); ++i) {
          C[i] = float_to_bf16(p.C0[i]);
          p.C0[i] = bf16_to_float(C[i]);
        }
        const std::vector<bf16> C_init = C;
        const std::vector<float> bias = values(static_cast<size_t>(p.N), 4);
        gemm_bf16_to_bf16(ctx, p.ta, p.tb, p.M, p.N, p.K, A.data(), p.lda, B.data(), p.ldb,
                          with_bias ? bias.data() : nullptr, accumulate, C.data(), p.ldc);
        const std::vector<double> ref = expected(p, 1.0f, accumulate ? 1.0f : 0.0f);
        // The staged plan's bits: f32 rows (bias or old C), gemm_bf16 onto them, narrowed.
        std::vector<float> staged(static_cast<size_t>(p.M * p.N));
        for (int64_t i = 0; i < p.M; ++i)
          for (int64_t j = 0; j < p.N; ++j)
            staged[i * p.N + j] = accumulate ? p.C0[i * p.ldc + j] : (with_bias ? bias[j] : 0.0f);
        gemm_bf16(ctx, p.ta, p.tb, p.M, p.N, p.K, 1.0f, A.data(), p.lda, B.data(), p.ldb,
                  with_bias || accumulate ? 1.0f : 0.0f, staged.data(), p.N);
        const std::string what = describe(native ? "bf16-out native" : "bf16-out staged",
                                          GemmBackend::OneDnn, p, 1.0f, accumulate) +
                                 (with_bias ? " bias" : "");
        int wrong = 0;
        for (int64_t i = 0; i < p.M; ++i)
          for (int64_t j = 0; j < p.ldc; ++j) {
            const uint16_t got = C[i * p.ldc + j].bits;
            if (j >= p.N) {
              wrong += got != C_init[i * p.ldc + j].bits;
              continue;
            }
            const double want = ref[i * p.N + j] + (with_bias ? bias[j] : 0.0);
            const double g = bf16_to_float(C[i * p.ldc + j]);
            const double tol = 1e-5 * static_cast<double>(p.K) + std::fabs(want) / 256.0 + 1e-6;
            bool ok = std::fabs(g - want) <= tol;
            if (!native) ok = ok && got == float_to_bf16(staged[i * p.N + j]).bits;
            if (!ok && ++wrong <= 3)
              ADD_FAILURE() << what << " C(" << i << "," << j << ") = " << g << ", want " << want
                            << ", staged " << staged[i * p.N + j];
          }
        EXPECT_EQ(wrong, 0) << what;
      }
}

INSTANTIATE_TEST_SUITE_P(GemmAtLevel, GemmAtLevel, ::testing::ValuesIn(kAllCpuIsas),
                         kernel_test::cpu_isa_test_name);

TEST(GemmTest, MeasurePeakIsPositive) {
  const double flops = measure_gemm_peak_f32(test_ctx(), 0.0);
  EXPECT_GT(flops, 1e8);
  EXPECT_LT(flops, 1e15);
}

}  // namespace
}  // namespace braid
