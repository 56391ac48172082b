// Single-threaded GEMM for the small blocks inside attention (AVX2+FMA register tiles chosen
// at run time, scalar fallback). The interim oneDNN sgemm reached well under half of its
// large-GEMM rate on these block shapes, so attention uses this instead.
#pragma once

#include <cstdint>

namespace braid::cpu {

// C (M, N) = alpha * A (M, K) @ B (K, N), or C += that when accumulate.
// A element (i, k) is a[i * a_row_stride + k * a_col_stride], so A or A^T of a row-major
// matrix both fit; B is row-major with row stride ldb; C row-major with row stride ldc.
// Without accumulate C is only written, never read.
void small_gemm(int64_t M, int64_t N, int64_t K, float alpha, const float* a,
                int64_t a_row_stride, int64_t a_col_stride, const float* b, int64_t ldb,
                bool accumulate, float* c, int64_t ldc);

}  // namespace braid::cpu
