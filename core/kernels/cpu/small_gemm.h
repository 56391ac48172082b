// Single-threaded GEMM for the small blocks inside attention (AVX2+FMA register tiles at the
// Avx2 instruction-set level, AVX-512 tiles with the same per-element arithmetic from Avx512
// up, scalar loops below). The interim oneDNN sgemm reached well under
// half of its large-GEMM rate on these block shapes, so attention uses this instead.
#pragma once

#include <cstdint>
#include <memory>

#include "core/dtype.h"
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

// The bf16 pair product behind the bf16 attention blocks: C (M, N) = alpha * sum over P pairs
// p of (a_i,2p * b_2p,j + a_i,2p+1 * b_2p+1,j), or C += that when accumulate. Both operands are
// bf16 in "pair" layout, the one VDPBF16PS reads: A row i holds its pairs contiguously at
// a + i * lda (lda in bf16 elements, even); B pair-row p holds, for each column j, the two
// values (b_2p,j, b_2p+1,j) side by side at b + p * ldb + 2 j (ldb in bf16 elements, >= 2 N).
// Products of bf16 are exact in f32; each pair is added to the f32 accumulator odd element
// first (VDPBF16PS's order), the pairs in order of p. Avx512Bf16 runs the vector tile; lower
// levels (tests, forced paths) the scalar loop with the same order. Amx runs the tile unit
// (TDPBF16PS, where the OS grants it), whose sums are within f32 rounding of the exact sum in
// the unit's own order (not the scalar loop's bits) and treat bf16 denormals as zero.
void small_gemm_bf16_pairs(CpuIsa isa, int64_t M, int64_t N, int64_t P, float alpha, const bf16* a,
                           int64_t lda, const bf16* b, int64_t ldb, bool accumulate, float* c,
                           int64_t ldc);

// Loads the AMX tile configuration of small_gemm_bf16_pairs once for this thread, so the calls
// inside the scope skip saving, loading and restoring it (tens of thousands of small products
// per attention call); the destructor puts back what the thread had. Nothing else may use the
// tiles inside the scope (oneDNN's GEMMs included). A no-op below Amx, or nested.
class AmxTileScope {
 public:
  explicit AmxTileScope(CpuIsa isa);
  ~AmxTileScope();
  AmxTileScope(const AmxTileScope&) = delete;
  AmxTileScope& operator=(const AmxTileScope&) = delete;

 private:
  struct Saved;
  std::unique_ptr<Saved> saved_;
};

}  // namespace braid::cpu
