// Internal GEMM backends behind core/kernels/gemm.h, callable one by one (tests, benchmarks).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/context.h"
#include "core/dtype.h"
#include "core/kernels/cpu/gemm_workspace.h"
#include "core/kernels/gemm_plan.h"

namespace braid {

// The contract of gemm_f32 / gemm_bf16 (core/kernels/gemm.h) on one chosen backend (and bf16
// mode) instead of the context's plan; the context gives the workspace and the instruction-set
// level. Native bf16 where native_bf16_available(b) is false widens instead. Not charged to
// the profiler.
void gemm_f32_with(ExecContext& ctx, GemmBackend b, bool trans_a, bool trans_b, int64_t M,
                   int64_t N, int64_t K, float alpha, const float* A, int64_t lda, const float* B,
                   int64_t ldb, float beta, float* C, int64_t ldc);
void gemm_bf16_with(ExecContext& ctx, GemmBackend b, Bf16Mode mode, bool trans_a, bool trans_b,
                    int64_t M, int64_t N, int64_t K, float alpha, const bf16* A, int64_t lda,
                    const bf16* B, int64_t ldb, float beta, float* C, int64_t ldc);

// True when oneDNN runs on an ISA with bf16 dot-product instructions (AVX512_BF16 or AMX),
// after any ONEDNN_MAX_CPU_ISA limit.
bool onednn_has_native_bf16();
// oneDNN's effective ISA by its own name ("avx2", "avx512_core_bf16", ...), for messages.
std::string onednn_isa_name();

// True when the loaded OpenBLAS exports cblas_sbgemm.
bool openblas_has_sbgemm();
// True when oneDNN can create a bf16 matmul on this CPU (at its effective ISA).
bool onednn_has_bf16_matmul();
// True when backend b has a bf16 kernel of its own here (checked once, then cached).
bool native_bf16_available(GemmBackend b);
// Why backend b has no bf16 kernel here ("" when it has): what a skipped test says.
std::string native_bf16_missing(GemmBackend b);

// Per-library entry points. Callers have already handled M == 0, N == 0 and K == 0.
void gemm_f32_onednn(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                     int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc);
// bf16 (f32 out) through a matmul primitive cached in the caller's scratch slot, one call per
// slice of `slice` of the inner dimension (the last one shorter; slice >= K: one call), the
// first scaling C by beta and each next adding onto it: f32 sums of the slices, so a sliced
// result differs from one call's only in rounding.
void gemm_bf16_onednn_sliced(GemmScratch& scratch, int64_t slice, bool ta, bool tb, int64_t M,
                             int64_t N, int64_t K, float alpha, const bf16* A, int64_t lda,
                             const bf16* B, int64_t ldb, float beta, float* C, int64_t ldc);
// bf16 inputs, bf16 output: C = round(op(A) op(B) + bias + (accumulate ? C : 0)), the sum in
// f32 and rounded once; bias (N floats) may be null.
void gemm_bf16_out_onednn(GemmScratch& scratch, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                          const bf16* A, int64_t lda, const bf16* B, int64_t ldb, const float* bias,
                          bool accumulate, bf16* C, int64_t ldc);
// f32 through the same cached matmul primitive as gemm_bf16_onednn_sliced (strides for transposes,
// alpha as output scale, beta as sum post-op), so that plumbing is testable on CPUs whose
// oneDNN has no bf16 matmul.
void gemm_f32_onednn_matmul(GemmScratch& scratch, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                            float alpha, const float* A, int64_t lda, const float* B, int64_t ldb,
                            float beta, float* C, int64_t ldc);
// f32 with an f32 bias row (N floats, every row): C = op(A) op(B) + bias, overwritten; the
// primitive adds the bias in its epilogue.
void gemm_f32_bias_onednn(GemmScratch& scratch, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                          const float* A, int64_t lda, const float* B, int64_t ldb,
                          const float* bias, float* C, int64_t ldc);
// True where oneDNN runs AVX-512 (its brgemm matmul): gemm_f32_bias takes the primitive there.
// On the benchmark model's forward shapes (N T) it ran as fast as dnnl_sgemm, and fusing the
// bias saves writing the bias into C and the GEMM reading it back.
bool onednn_f32_bias_fused();
// True when gemm_f32 on oneDNN should take the matmul primitive rather than dnnl_sgemm: the
// weight-gradient layout (op(A) = A^T, B as stored) with M of at least 1024, K of at least 256
// and N below 768, on CPUs where oneDNN runs AVX-512 (its brgemm matmul). There, with N of
// 256-640 (the benchmark model's width of 512, and the LM head's chunks of 512 rows), sgemm ran
// 230-300 GFLOP/s and the primitive 300-350; with N of 768 and more (GPT-2 124M's width) sgemm
// was 5-20 % faster, and with M = 512 too (docs/benchmarks.md).
bool onednn_f32_matmul_preferred(bool ta, bool tb, int64_t M, int64_t N, int64_t K);

// The inner-dimension slice gemm_bf16 runs oneDNN's f32-output bf16 matmul in
// (gemm_bf16_onednn_sliced; K itself: one call). Only on AMX, where oneDNN 2.6's matmul ran these
// layouts faster in slices (2 threads; bench_gemm, docs/benchmarks.md):
// - A transposed (the weight gradients dy^T x, K the tokens) with K of at least 1024 and M and
//   N of at least 512: slices of 512, 1.1-1.3x (the linears' dW of the benchmark model and
//   GPT-2 124M); with M or N of 16-256 from 0.9x to 1.3x between runs, so one call there;
// - both operands as stored, at least 512 rows and K of 8192 and more (the LM head's input
//   gradient: logits gradient times the (vocabulary, width) weight): slices of max(1024, N),
//   N capped at 4096, 1.2-1.4x at vocabularies of 8192-50304; with 64-256 rows slower.
int64_t onednn_bf16_k_slice(bool ta, bool tb, int64_t M, int64_t N, int64_t K);
// The shortest slice of that rule for a layout (512 with A transposed, else max(1024, N) up to
// 4096), whether or not the rule slices the shape.
int64_t onednn_bf16_slice_length(bool ta, int64_t N);
// How many matmul primitives a scratch slot holds (tests: the cache is reused, not rebuilt).
size_t onednn_cached_matmuls(const GemmScratch& scratch);
void gemm_f32_openblas(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                       const float* A, int64_t lda, const float* B, int64_t ldb, float beta,
                       float* C, int64_t ldc);
void gemm_bf16_openblas(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                        const bf16* A, int64_t lda, const bf16* B, int64_t ldb, float beta,
                        float* C, int64_t ldc);
void gemm_f32_reference(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                        const float* A, int64_t lda, const float* B, int64_t ldb, float beta,
                        float* C, int64_t ldc);
void gemm_bf16_reference(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                         const bf16* A, int64_t lda, const bf16* B, int64_t ldb, float beta,
                         float* C, int64_t ldc);

}  // namespace braid
