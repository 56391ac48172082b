// GEMM on OpenBLAS: cblas_sgemm for f32, cblas_sbgemm (when the library has it) for bf16.
#include <cblas.h>
#include <dlfcn.h>

#include <climits>

#include "core/error.h"
#include "core/kernels/cpu/gemm_backends.h"

namespace braid {
namespace {

// cblas takes 32-bit ints unless OpenBLAS was built with INTERFACE64.
void check_int_range(int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb, int64_t ldc) {
  for (int64_t v : {M, N, K, lda, ldb, ldc})
    BRAID_CHECK(v <= INT_MAX, "OpenBLAS GEMM dimension {} exceeds its 32-bit interface", v);
}

CBLAS_TRANSPOSE trans(bool t) { return t ? CblasTrans : CblasNoTrans; }

// Builds without BUILD_BFLOAT16 (Debian's 0.3.21) declare cblas_sbgemm but do not export it,
// so it is looked up at run time instead of linked.
using SbgemmFn = decltype(&cblas_sbgemm);
SbgemmFn find_sbgemm() {
  static const SbgemmFn fn = reinterpret_cast<SbgemmFn>(dlsym(RTLD_DEFAULT, "cblas_sbgemm"));
  return fn;
}

}  // namespace

bool openblas_has_sbgemm() { return find_sbgemm() != nullptr; }

void gemm_f32_openblas(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                       const float* A, int64_t lda, const float* B, int64_t ldb, float beta,
                       float* C, int64_t ldc) {
  check_int_range(M, N, K, lda, ldb, ldc);
  cblas_sgemm(CblasRowMajor, trans(ta), trans(tb), static_cast<blasint>(M), static_cast<blasint>(N),
              static_cast<blasint>(K), alpha, A, static_cast<blasint>(lda), B,
              static_cast<blasint>(ldb), beta, C, static_cast<blasint>(ldc));
}

void gemm_bf16_openblas(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                        const bf16* A, int64_t lda, const bf16* B, int64_t ldb, float beta,
                        float* C, int64_t ldc) {
  static_assert(sizeof(bf16) == sizeof(bfloat16), "braid::bf16 must match OpenBLAS bfloat16");
  check_int_range(M, N, K, lda, ldb, ldc);
  const SbgemmFn sbgemm = find_sbgemm();
  BRAID_CHECK(sbgemm != nullptr, "this OpenBLAS has no cblas_sbgemm (built without bfloat16)");
  sbgemm(CblasRowMajor, trans(ta), trans(tb), static_cast<blasint>(M), static_cast<blasint>(N),
         static_cast<blasint>(K), alpha, reinterpret_cast<const bfloat16*>(A),
         static_cast<blasint>(lda), reinterpret_cast<const bfloat16*>(B), static_cast<blasint>(ldb),
         beta, C, static_cast<blasint>(ldc));
}

}  // namespace braid
