// The one GEMM interface of braid. Row-major, BLAS-like; the CPU library behind it is chosen
// at run time (see docs/benchmarks.md for why), never by callers.
#pragma once

#include <cstdint>
#include <string>

#include "core/context.h"
#include "core/dtype.h"

namespace braid {

// C (M, N) = alpha * op(A) (M, K) @ op(B) (K, N) + beta * C, all row-major.
// op(A) = A (M, K) with lda >= K when !trans_a, else A is stored (K, M) with lda >= M.
// op(B) = B (K, N) with ldb >= N when !trans_b, else B is stored (N, K) with ldb >= K.
// Multi-threaded over the process's OpenMP threads; when called from inside an OpenMP
// parallel region it runs on the calling thread only.
// The context's GEMM plan picks the library; the call is charged to its profiler.
void gemm_f32(ExecContext& ctx, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
              float alpha, const float* A, int64_t lda, const float* B, int64_t ldb, float beta,
              float* C, int64_t ldc);

// C (M, N) = op(A) @ op(B) + bias (N floats added to every row), overwritten (C is not read):
// a linear layer's forward. With oneDNN on AVX-512 the matmul primitive adds the bias in its
// epilogue (one pass over C); elsewhere the bias is written into C and the GEMM adds onto it.
void gemm_f32_bias(ExecContext& ctx, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                   const float* A, int64_t lda, const float* B, int64_t ldb, const float* bias,
                   float* C, int64_t ldc);

// Same contract with bf16 inputs and f32 accumulation/output.
void gemm_bf16(ExecContext& ctx, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
               float alpha, const bf16* A, int64_t lda, const bf16* B, int64_t ldb, float beta,
               float* C, int64_t ldc);

// bf16 inputs and a bf16 output: C = round_bf16(op(A) @ op(B) + bias + (accumulate ? C : 0)),
// summed in f32 and rounded once (round to nearest even); bias (N floats, added to every row)
// may be null. On a native bf16 plan (oneDNN) the library writes C directly, bias fused, so no
// f32 copy of C exists; otherwise C is computed in f32 workspace (bias first, then the GEMM
// onto it) and narrowed, as a staged kernel would.
void gemm_bf16_to_bf16(ExecContext& ctx, bool trans_a, bool trans_b, int64_t M, int64_t N,
                       int64_t K, const bf16* A, int64_t lda, const bf16* B, int64_t ldb,
                       const float* bias, bool accumulate, bf16* C, int64_t ldc);

// Same contract with f16 inputs: widened to f32 in front of the f32 GEMM (no CPU library
// here has an f16 matmul that is faster than that without AVX512_FP16/AMX-FP16).
void gemm_f16(ExecContext& ctx, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
              float alpha, const f16* A, int64_t lda, const f16* B, int64_t ldb, float beta,
              float* C, int64_t ldc);

// "native (oneDNN bf16 matmul)" or "widened to f32 (why)": what gemm_bf16 does under the
// context's plan and instruction-set level, for the training log.
std::string gemm_bf16_description(const ExecContext& ctx);

// Which implementation a plan runs ("onednn", "openblas", "reference"), for logs.
std::string gemm_backend_name(const GemmPlan& plan);

}  // namespace braid

namespace braid {

// Times square f32 GEMMs (1024^3) through gemm_f32 for about `seconds` (at least one call
// after a warm-up) and returns the best observed FLOP/s: a machine peak for MFU when none
// is configured.
double measure_gemm_peak_f32(ExecContext& ctx, double seconds);
// The same through gemm_bf16 (bf16 inputs, f32 output): the bf16 peak under the context's plan.
double measure_gemm_peak_bf16(ExecContext& ctx, double seconds);

}  // namespace braid

// Backend choice: oneDNN by default (docs/benchmarks.md). launch/ reads BRAID_GEMM=
// onednn|openblas|reference into the context's plan (launch/train/exec_setup.h).
// ONEDNN_MAX_CPU_ISA (oneDNN's own) limits oneDNN's ISA.
