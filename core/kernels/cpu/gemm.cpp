// GEMM backends for the CPU (interim: oneDNN sgemm; bf16 converts to f32).
#include "core/kernels/gemm.h"

#include <oneapi/dnnl/dnnl.h>

#include <vector>

#include "core/error.h"

namespace braid {

void gemm_f32(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
              const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
              int64_t ldc) {
  if (M == 0 || N == 0) return;
  const dnnl_status_t st = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', M, N, K, alpha, A,
                                      lda, B, ldb, beta, C, ldc);
  BRAID_CHECK(st == dnnl_success, "dnnl_sgemm failed with status {}", static_cast<int>(st));
}

void gemm_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
               const bf16* A, int64_t lda, const bf16* B, int64_t ldb, float beta, float* C,
               int64_t ldc) {
  const int64_t rows_a = trans_a ? K : M, rows_b = trans_b ? N : K;
  std::vector<float> a(static_cast<size_t>(rows_a * lda)), b(static_cast<size_t>(rows_b * ldb));
  for (size_t i = 0; i < a.size(); ++i) a[i] = bf16_to_float(A[i]);
  for (size_t i = 0; i < b.size(); ++i) b[i] = bf16_to_float(B[i]);
  gemm_f32(trans_a, trans_b, M, N, K, alpha, a.data(), lda, b.data(), ldb, beta, C, ldc);
}

std::string gemm_backend_name() { return "onednn"; }

}  // namespace braid
