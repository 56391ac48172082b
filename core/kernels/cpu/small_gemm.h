// Single-threaded GEMM for the small blocks inside attention (AVX2+FMA register tiles from the
// Avx2 instruction-set level up, scalar loops below). The interim oneDNN sgemm reached well under half of its
// large-GEMM rate on these block shapes, so attention uses this instead.
#pragma once

#include <cstdint>

#include "core/kernels/cpu/cpu_isa.h"

namespace braid::cpu {

// C (M, N) = alpha * A (M, K) @ B (K, N), or C += that when accumulate.
// A element (i, k) is a[i * a_row_stride + k * a_col_stride], so A or A^T of a row-major
// matrix both fit; B is row-major with row stride ldb; C row-major with row stride ldc.
// Without accumulate C is only written, never read. `isa` (the context's level) picks the
// path and must be one this CPU supports.
void small_gemm(CpuIsa isa, int64_t M, int64_t N, int64_t K, float alpha, const float* a,
                int64_t a_row_stride, int64_t a_col_stride, const float* b, int64_t ldb,
                bool accumulate, float* c, int64_t ldc);

}  // namespace braid::cpu
