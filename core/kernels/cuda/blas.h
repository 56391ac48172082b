// GEMMs on the GPU through cuBLASLt, with the CPU GEMM's row-major contract (core/kernels/gemm.h):
// C (M, N) = alpha * op(A) (M, K) @ op(B) (K, N) + beta * C.
// op(A) = A (M, K), lda >= K when !trans_a, else A stored (K, M) with lda >= M; the same for B.
// A and B share one dtype (f32, bf16, f16); C is f32 or that dtype; accumulation is f32
// (f32 inputs run true f32 unless the context allows TF32). Queued on the context's stream; the
// heuristic's algorithm is cached per shape, the workspace comes from the context's allocator.
#pragma once

#include <cstdint>

#include "core/context.h"

namespace braid::cuda {

// K == 0: C = beta * C (beta 0 or 1). `exact_f32`: f32 inputs run true f32 even where the
// context allows TF32 (sums that must not lose the inputs' low bits, e.g. a bias gradient).
void gemm(ExecContext& ctx, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
          float alpha, const void* A, int64_t lda, const void* B, int64_t ldb, float beta, void* C,
          int64_t ldc, DType ab_dtype, DType c_dtype, bool exact_f32 = false);

// C (M, N) = alpha * op(A) op(B) + bias, the bias (N values of bias_dtype: f32 or C's dtype)
// added to every row in cuBLASLt's epilogue, in f32 before C is rounded once. Returns false,
// queuing nothing, when cuBLASLt has no algorithm for this epilogue and shape, or K == 0 (the
// caller then writes the bias and uses gemm with beta = 1).
bool gemm_bias(ExecContext& ctx, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
               float alpha, const void* A, int64_t lda, const void* B, int64_t ldb, void* C,
               int64_t ldc, DType ab_dtype, DType c_dtype, const void* bias, DType bias_dtype);

}  // namespace braid::cuda
