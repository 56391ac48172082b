// cuBLASLt GEMMs behind core/kernels/cuda/blas.h. Row-major C = op(A) op(B) is computed as the
// column-major C^T = op(B)^T op(A)^T, so A and B swap places and no data moves.
#include "core/kernels/cuda/blas.h"

#include <cublasLt.h>
#include <fmt/format.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/kernels/cuda/cuda_kernels.h"
#include "core/kernels/cuda/cuda_state.h"
#include "core/kernels/cuda/ops_util.h"
#include "core/profile.h"

#define CUBLAS_CHECK(call)                                                                        \
  do {                                                                                            \
    const cublasStatus_t braid_blas_st_ = (call);                                                 \
    if (braid_blas_st_ != CUBLAS_STATUS_SUCCESS) [[unlikely]]                                     \
      ::braid::detail::throw_error(                                                               \
          __FILE__, __LINE__,                                                                     \
          fmt::format("cuBLASLt error in {}: {} ({})", #call,                                     \
                      cublasLt_status_string(braid_blas_st_), static_cast<int>(braid_blas_st_))); \
  } while (0)

namespace braid::cuda {

namespace {

const char* cublasLt_status_string(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "not initialised";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "invalid value";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "architecture mismatch";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "execution failed";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "internal error";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "not supported";
    default:
      return "error";
  }
}

constexpr size_t kWorkspaceBytes = size_t{32} << 20;  // Hopper's kernels want up to 32 MiB

cudaDataType_t cuda_type(DType d) {
  switch (d) {
    case DType::BF16:
      return CUDA_R_16BF;
    case DType::F16:
      return CUDA_R_16F;
    case DType::F32:
      return CUDA_R_32F;
    default:
      BRAID_CHECK(false, "GEMM of {}: expected f32, bf16 or f16", dtype_name(d));
  }
}

// The largest power of two, up to 256 (cuBLASLt's default assumption), dividing the address.
int alignment(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  int align = 1;
  while (align < 256 && (a & static_cast<uintptr_t>(align)) == 0) align <<= 1;
  return align;
}

void destroy(GemmPlanCache& p) {
  if (p.a) cublasLtMatrixLayoutDestroy(p.a);
  if (p.b) cublasLtMatrixLayoutDestroy(p.b);
  if (p.c) cublasLtMatrixLayoutDestroy(p.c);
  if (p.desc) cublasLtMatmulDescDestroy(p.desc);
}

}  // namespace

CudaState::CudaState(ExecContext& ctx) {
  const char* cudnn_env = std::getenv("BRAID_CUDNN_ATTENTION");
  cudnn_attention = !(cudnn_env && std::string(cudnn_env) == "0");
  CUBLAS_CHECK(cublasLtCreate(&lt));
  workspace = ctx.empty({static_cast<int64_t>(kWorkspaceBytes / sizeof(int32_t))}, DType::I32,
                        MemCategory::Workspace);
}

CudaState::~CudaState() {
  cudnn.reset();  // its graphs' workspace comes from the context's allocator too
  for (auto& [k, p] : plans) destroy(p);
  if (lt) cublasLtDestroy(lt);
}

CudaState& state_of(ExecContext& ctx) {
  if (!ctx.backend_state()) ctx.set_backend_state(std::make_unique<CudaState>(ctx));
  return static_cast<CudaState&>(*ctx.backend_state());
}

void set_allow_tf32(ExecContext& ctx, bool allow) { state_of(ctx).allow_tf32 = allow; }
void set_deterministic(ExecContext& ctx, bool deterministic) {
  state_of(ctx).deterministic = deterministic;
}

namespace {

// The plan for one GEMM shape (found or made), and the matmul queued; false when cuBLASLt has
// no algorithm and `may_fail` (the bias epilogue), else an error.
bool run_gemm(ExecContext& ctx, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
              float alpha, const void* A, int64_t lda, const void* B, int64_t ldb, float beta,
              void* C, int64_t ldc, DType ab_dtype, DType c_dtype, const void* bias,
              DType bias_dtype, bool exact_f32) {
  BRAID_CHECK(c_dtype == DType::F32 || c_dtype == ab_dtype,
              "GEMM: C is {} with {} inputs; expected f32 or {}", dtype_name(c_dtype),
              dtype_name(ab_dtype), dtype_name(ab_dtype));
  CudaState& st = state_of(ctx);
  const bool tf32 = ab_dtype == DType::F32 && st.allow_tf32 && !exact_f32;
  const GemmKey key{trans_a,
                    trans_b,
                    M,
                    N,
                    K,
                    lda,
                    ldb,
                    ldc,
                    static_cast<int>(ab_dtype),
                    static_cast<int>(c_dtype),
                    beta == 0.0f,
                    tf32,
                    alignment(A),
                    alignment(B),
                    alignment(C),
                    bias ? static_cast<int>(bias_dtype) : -1,
                    bias ? alignment(bias) : 0};
  auto it = st.plans.find(key);
  if (it == st.plans.end()) {
    GemmPlanCache p;
    const cublasComputeType_t compute =
        ab_dtype == DType::F32 ? (tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F)
                               : CUBLAS_COMPUTE_32F;
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.desc, compute, CUDA_R_32F));
    // Column-major view: C^T (N, M) = op(B)^T (N, K) op(A)^T (K, M). B's row-major storage is
    // column-major B^T: no transpose in the column-major op when !trans_b.
    const cublasOperation_t op_first = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_second = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_first,
                                                sizeof(op_first)));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_second,
                                                sizeof(op_second)));
    if (bias) {
      // Column-major view: the bias runs along C^T's rows (N of them), as the epilogue adds it.
      const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
      const cudaDataType_t bt = cuda_type(bias_dtype);
      CUBLAS_CHECK(
          cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
      CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt,
                                                  sizeof(bt)));
      // Before the search: it judges the bias's alignment from the pointer it is given.
      CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                                  sizeof(bias)));
    }
    const cudaDataType_t ab = cuda_type(ab_dtype), ct = cuda_type(c_dtype);
    // The first operand (B^T as stored): rows x cols in column-major terms.
    const uint64_t b_rows = trans_b ? static_cast<uint64_t>(K) : static_cast<uint64_t>(N);
    const uint64_t b_cols = trans_b ? static_cast<uint64_t>(N) : static_cast<uint64_t>(K);
    const uint64_t a_rows = trans_a ? static_cast<uint64_t>(M) : static_cast<uint64_t>(K);
    const uint64_t a_cols = trans_a ? static_cast<uint64_t>(K) : static_cast<uint64_t>(M);
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, ab, b_rows, b_cols, ldb));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, ab, a_rows, a_cols, lda));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.c, ct, static_cast<uint64_t>(N),
                                            static_cast<uint64_t>(M), ldc));
    cublasLtMatmulPreference_t pref = nullptr;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const size_t ws = st.workspace.nbytes();
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
    // The first cuBLASLt operand is B, the second A (the column-major view above).
    const uint32_t align_first = static_cast<uint32_t>(key.align_b),
                   align_second = static_cast<uint32_t>(key.align_a),
                   align_c = static_cast<uint32_t>(key.align_c);
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_first, sizeof(align_first)));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_second, sizeof(align_second)));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_c, sizeof(align_c)));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_c, sizeof(align_c)));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t hs =
        cublasLtMatmulAlgoGetHeuristic(st.lt, p.desc, p.b, p.a, p.c, p.c, pref, 1, &result, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if ((hs != CUBLAS_STATUS_SUCCESS || found == 0) && bias) {
      p.found = false;  // the caller adds the bias itself, now and for every later call
    } else if (hs != CUBLAS_STATUS_SUCCESS || found == 0) {
      destroy(p);
      BRAID_CHECK(false, "cuBLASLt has no algorithm for GEMM {}x{}x{} ({} inputs, {} output{})", M,
                  N, K, dtype_name(ab_dtype), dtype_name(c_dtype), trans_a ? ", A transposed" : "");
    }
    p.algo = result.algo;
    it = st.plans.emplace(key, p).first;
  }
  const GemmPlanCache& p = it->second;
  if (!p.found) return false;
  if (bias)
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                                sizeof(bias)));
  CUBLAS_CHECK(cublasLtMatmul(st.lt, p.desc, &alpha, B, p.b, A, p.a, &beta, C, p.c, C, p.c, &p.algo,
                              st.workspace.raw(), st.workspace.nbytes(),
                              static_cast<cudaStream_t>(ctx.stream().handle)));
  return true;
}

}  // namespace

void gemm(ExecContext& ctx, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
          float alpha, const void* A, int64_t lda, const void* B, int64_t ldb, float beta, void* C,
          int64_t ldc, DType ab_dtype, DType c_dtype, bool exact_f32) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Gemm);
  if (M == 0 || N == 0) return;
  if (K == 0) {  // an empty sum: C = beta * C, without asking cuBLASLt for a k = 0 plan
    BRAID_CHECK(beta == 0.0f || beta == 1.0f, "GEMM with K = 0 and beta {}; expected 0 or 1", beta);
    const size_t elem = dtype_size(c_dtype);
    if (beta == 0.0f)
      CUDA_CHECK(cudaMemset2DAsync(C, static_cast<size_t>(ldc) * elem, 0,
                                   static_cast<size_t>(N) * elem, static_cast<size_t>(M),
                                   static_cast<cudaStream_t>(ctx.stream().handle)));
    return;
  }
  run_gemm(ctx, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, ab_dtype, c_dtype,
           nullptr, DType::F32, exact_f32);
}

bool gemm_bias(ExecContext& ctx, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
               float alpha, const void* A, int64_t lda, const void* B, int64_t ldb, void* C,
               int64_t ldc, DType ab_dtype, DType c_dtype, const void* bias, DType bias_dtype) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Gemm);
  if (M == 0 || N == 0) return true;
  if (K == 0) return false;  // the caller writes the bias, and gemm adds the empty product
  BRAID_CHECK(bias != nullptr, "gemm_bias without a bias");
  BRAID_CHECK(bias_dtype == DType::F32 || bias_dtype == c_dtype,
              "GEMM bias of {} with a {} output; expected f32 or {}", dtype_name(bias_dtype),
              dtype_name(c_dtype), dtype_name(c_dtype));
  return run_gemm(ctx, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, 0.0f, C, ldc, ab_dtype,
                  c_dtype, bias, bias_dtype, false);
}

}  // namespace braid::cuda
