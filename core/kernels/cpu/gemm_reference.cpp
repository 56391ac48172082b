// Reference GEMM: plain blocked loops, correct for every transpose and leading dimension.
#include <omp.h>

#include <algorithm>
#include <vector>

#include "core/kernels/cpu/gemm_backends.h"

namespace braid {
namespace {

inline float to_f32(float v) { return v; }
inline float to_f32(bf16 v) { return bf16_to_float(v); }

// Slow but simple: op(B) is copied in panels of kBlockK rows into a dense (kb, N) buffer, then
// each row of C takes axpy updates, so the inner loop is contiguous whatever the layout.
template <typename T>
void gemm_reference_impl(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const T* A,
                         int64_t lda, const T* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  constexpr int64_t kBlockK = 128;
  // Nested regions would oversubscribe; inside one this runs on the calling thread only.
  const bool threaded = !omp_in_parallel() && M * N * K >= (int64_t{1} << 18);
#pragma omp parallel for schedule(static) if (threaded)
  for (int64_t i = 0; i < M; ++i) {
    float* c = C + i * ldc;
    for (int64_t j = 0; j < N; ++j) c[j] = beta == 0.0f ? 0.0f : beta * c[j];  // c: (N)
  }
  std::vector<float> panel(static_cast<size_t>(std::min(K, kBlockK) * N));  // (kb, N)
  for (int64_t k0 = 0; k0 < K; k0 += kBlockK) {
    const int64_t kb = std::min(kBlockK, K - k0);
#pragma omp parallel for schedule(static) if (threaded)
    for (int64_t kk = 0; kk < kb; ++kk) {
      float* p = panel.data() + kk * N;
      for (int64_t j = 0; j < N; ++j)
        p[j] = to_f32(tb ? B[j * ldb + k0 + kk] : B[(k0 + kk) * ldb + j]);
    }
#pragma omp parallel for schedule(static) if (threaded)
    for (int64_t i = 0; i < M; ++i) {
      float* c = C + i * ldc;
      for (int64_t kk = 0; kk < kb; ++kk) {
        const float a = alpha * to_f32(ta ? A[(k0 + kk) * lda + i] : A[i * lda + k0 + kk]);
        const float* p = panel.data() + kk * N;
        for (int64_t j = 0; j < N; ++j) c[j] += a * p[j];
      }
    }
  }
}

}  // namespace

void gemm_f32_reference(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                        const float* A, int64_t lda, const float* B, int64_t ldb, float beta,
                        float* C, int64_t ldc) {
  gemm_reference_impl(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void gemm_bf16_reference(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                         const bf16* A, int64_t lda, const bf16* B, int64_t ldb, float beta,
                         float* C, int64_t ldc) {
  gemm_reference_impl(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

}  // namespace braid
