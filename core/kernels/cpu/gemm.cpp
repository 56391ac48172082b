// GEMM dispatch for the CPU: routes gemm_f32/gemm_bf16 to the backend of the context's plan,
// widening 16-bit inputs into the context's GEMM workspace where the plan (or library) says so.
#include "core/kernels/gemm.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "core/error.h"
#include "core/kernels/cpu/convert.h"
#include "core/kernels/cpu/gemm_backends.h"
#include "core/memory.h"
#include "core/profile.h"
#include "core/tensor.h"

namespace braid {
namespace {

// C (M, N) = beta * C without reading C when beta == 0 (it may hold NaN garbage).
void scale_c(int64_t M, int64_t N, float beta, float* C, int64_t ldc) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[i * ldc + j];
}

// Widens a (rows, cols) bf16 matrix with leading dim ld into a dense f32 buffer.
const float* widen(const bf16* src, int64_t rows, int64_t cols, int64_t ld,
                   std::vector<float>& buf) {
  buf.resize(static_cast<size_t>(rows * cols));
  float* dst = buf.data();
  const bool threaded = !omp_in_parallel() && rows * cols >= (int64_t{1} << 16);
#pragma omp parallel for schedule(static) if (threaded)
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) dst[r * cols + c] = bf16_to_float(src[r * ld + c]);
  return dst;
}

// The same for f16, through the conversion path of the context's instruction-set level.
const float* widen(cpu::ConvertIsa path, const f16* src, int64_t rows, int64_t cols, int64_t ld,
                   std::vector<float>& buf) {
  buf.resize(static_cast<size_t>(rows * cols));
  float* dst = buf.data();
  const bool threaded = !omp_in_parallel() && rows * cols >= (int64_t{1} << 16);
#pragma omp parallel for schedule(static) if (threaded)
  for (int64_t r = 0; r < rows; ++r)
    cpu::widen_to_f32(path, DType::F16, src + r * ld, dst + r * cols, cols);
  return dst;
}

// Times best-of square n^3 GEMMs by `run` for about `seconds` after a warm-up call.
template <class Run>
double best_gemm_rate(int64_t n, double seconds, Run run) {
  run();  // warm-up: thread pool start, page faults, packing buffers
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  double best_s = 1e30;
  do {
    const auto t0 = clock::now();
    run();
    best_s = std::min(best_s, std::chrono::duration<double>(clock::now() - t0).count());
  } while (std::chrono::duration<double>(clock::now() - start).count() < seconds);
  return 2.0 * static_cast<double>(n * n * n) / best_s;  // best call: the peak, not the mean
}

}  // namespace

std::string_view gemm_backend_label(GemmBackend b) {
  switch (b) {
    case GemmBackend::OneDnn:
      return "onednn";
    case GemmBackend::OpenBlas:
      return "openblas";
    case GemmBackend::Reference:
      return "reference";
  }
  return "unknown";
}

bool parse_gemm_backend(std::string_view s, GemmBackend* out) {
  for (GemmBackend b : kAllGemmBackends) {
    if (s == gemm_backend_label(b)) {
      *out = b;
      return true;
    }
  }
  return false;
}

bool native_bf16_available(GemmBackend b) {
  switch (b) {
    case GemmBackend::OneDnn:
      return onednn_has_bf16_matmul();
    case GemmBackend::OpenBlas:
      return openblas_has_sbgemm();
    case GemmBackend::Reference:
      return true;
  }
  return false;
}

std::string native_bf16_missing(GemmBackend b) {
  if (native_bf16_available(b)) return "";
  switch (b) {
    case GemmBackend::OneDnn:
      return fmt::format(
          "oneDNN has no bf16 matmul at its effective ISA {} (oneDNN 2.6 needs AVX-512; "
          "ONEDNN_MAX_CPU_ISA may cap it)",
          onednn_isa_name());
    case GemmBackend::OpenBlas:
      return "this OpenBLAS has no cblas_sbgemm (built without BUILD_BFLOAT16)";
    case GemmBackend::Reference:
      break;
  }
  return "no bf16 kernel";
}

GemmPlan default_gemm_plan(GemmBackend backend, CpuIsa isa) {
  GemmPlan plan;
#if BRAID_NO_ONEDNN
  // A build without oneDNN (core/kernels/cpu/gemm_absent.cpp) runs its default on the
  // reference GEMM.
  if (backend == GemmBackend::OneDnn) backend = GemmBackend::Reference;
#endif
  plan.backend = backend;
  // Native bf16 kernels pay off only with bf16 dot instructions, at the context's level and
  // in the library (oneDNN's effective ISA honours ONEDNN_MAX_CPU_ISA); without them widening
  // to f32 (O(MK + KN) work) in front of sgemm is the fast path. Each backend is asked about
  // its own kernel: OpenBLAS's sbgemm is a separate question from oneDNN's ISA.
  bool native = false;
  switch (backend) {
    case GemmBackend::OneDnn:
      native =
          isa >= CpuIsa::Avx512Bf16 && onednn_has_native_bf16() && native_bf16_available(backend);
      break;
    case GemmBackend::OpenBlas:
      native = isa >= CpuIsa::Avx512Bf16 && native_bf16_available(backend);
      break;
    case GemmBackend::Reference:
      native = true;  // plain loops either way; native skips the widening copies
      break;
  }
  plan.bf16_mode = native ? Bf16Mode::Native : Bf16Mode::Widen;
  return plan;
}

void gemm_f32_with(ExecContext& ctx, GemmBackend b, bool trans_a, bool trans_b, int64_t M,
                   int64_t N, int64_t K, float alpha, const float* A, int64_t lda, const float* B,
                   int64_t ldb, float beta, float* C, int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) return scale_c(M, N, beta, C, ldc);
  switch (b) {
    case GemmBackend::OneDnn:
      // Inside a parallel region a call stays on its thread: sgemm does, the primitive would not.
      if (!omp_in_parallel() && onednn_f32_matmul_preferred(trans_a, trans_b, M, N, K)) {
        const GemmWorkspace::Lease scratch = ctx.gemm_workspace().lease();
        return gemm_f32_onednn_matmul(*scratch, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb,
                                      beta, C, ldc);
      }
      return gemm_f32_onednn(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    case GemmBackend::OpenBlas:
      return gemm_f32_openblas(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    case GemmBackend::Reference:
      return gemm_f32_reference(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  }
}

void gemm_bf16_with(ExecContext& ctx, GemmBackend b, Bf16Mode mode, bool trans_a, bool trans_b,
                    int64_t M, int64_t N, int64_t K, float alpha, const bf16* A, int64_t lda,
                    const bf16* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) return scale_c(M, N, beta, C, ldc);
  if (mode == Bf16Mode::Widen || !native_bf16_available(b)) {
    // A slot of the context's workspace, so callers inside a parallel region never share one.
    const GemmWorkspace::Lease scratch = ctx.gemm_workspace().lease();
    const int64_t a_cols = trans_a ? M : K, b_cols = trans_b ? K : N;
    const float* a = widen(A, trans_a ? K : M, a_cols, lda, scratch->a_buf);
    const float* bw = widen(B, trans_b ? N : K, b_cols, ldb, scratch->b_buf);
    return gemm_f32_with(ctx, b, trans_a, trans_b, M, N, K, alpha, a, a_cols, bw, b_cols, beta, C,
                         ldc);
  }
  switch (b) {
    case GemmBackend::OneDnn: {
      const GemmWorkspace::Lease scratch = ctx.gemm_workspace().lease();
      return gemm_bf16_onednn_sliced(*scratch, onednn_bf16_k_slice(trans_a, trans_b, M, N, K),
                                     trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C,
                                     ldc);
    }
    case GemmBackend::OpenBlas:
      return gemm_bf16_openblas(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    case GemmBackend::Reference:
      return gemm_bf16_reference(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  }
}

void gemm_f32(ExecContext& ctx, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
              float alpha, const float* A, int64_t lda, const float* B, int64_t ldb, float beta,
              float* C, int64_t ldc) {
  BRAID_CHECK(ctx.device().is_cpu(), "gemm_f32 on {}: no CUDA GEMM yet", ctx.device().str());
  KernelTimer timer(ctx.profiler(), KernelGroup::Gemm);
  gemm_f32_with(ctx, ctx.gemm().backend, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C,
                ldc);
}

void gemm_f32_bias(ExecContext& ctx, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                   const float* A, int64_t lda, const float* B, int64_t ldb, const float* bias,
                   float* C, int64_t ldc) {
  BRAID_CHECK(ctx.device().is_cpu(), "gemm_f32_bias on {}: no CUDA GEMM yet", ctx.device().str());
  KernelTimer timer(ctx.profiler(), KernelGroup::Gemm);
  if (M <= 0 || N <= 0) return;
  const GemmBackend b = ctx.gemm().backend;
  // Inside a parallel region a call stays on its thread: sgemm does, the primitive would not.
  if (K > 0 && b == GemmBackend::OneDnn && !omp_in_parallel() && onednn_f32_bias_fused()) {
    const GemmWorkspace::Lease scratch = ctx.gemm_workspace().lease();
    return gemm_f32_bias_onednn(*scratch, trans_a, trans_b, M, N, K, A, lda, B, ldb, bias, C, ldc);
  }
#pragma omp parallel for schedule(static) if (!omp_in_parallel())
  for (int64_t r = 0; r < M; ++r) std::copy(bias, bias + N, C + r * ldc);
  gemm_f32_with(ctx, b, trans_a, trans_b, M, N, K, 1.0f, A, lda, B, ldb, 1.0f, C, ldc);
}

void gemm_bf16(ExecContext& ctx, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
               float alpha, const bf16* A, int64_t lda, const bf16* B, int64_t ldb, float beta,
               float* C, int64_t ldc) {
  BRAID_CHECK(ctx.device().is_cpu(), "gemm_bf16 on {}: no CUDA GEMM yet", ctx.device().str());
  KernelTimer timer(ctx.profiler(), KernelGroup::Gemm);
  const GemmPlan& plan = ctx.gemm();
  gemm_bf16_with(ctx, plan.backend, plan.bf16_mode, trans_a, trans_b, M, N, K, alpha, A, lda, B,
                 ldb, beta, C, ldc);
}

void gemm_bf16_to_bf16(ExecContext& ctx, bool trans_a, bool trans_b, int64_t M, int64_t N,
                       int64_t K, const bf16* A, int64_t lda, const bf16* B, int64_t ldb,
                       const float* bias, bool accumulate, bf16* C, int64_t ldc) {
  BRAID_CHECK(ctx.device().is_cpu(), "gemm_bf16_to_bf16 on {}: no CUDA GEMM yet",
              ctx.device().str());
  if (M <= 0 || N <= 0) return;
  const GemmPlan& plan = ctx.gemm();
  if (K > 0 && plan.backend == GemmBackend::OneDnn && plan.bf16_mode == Bf16Mode::Native &&
      native_bf16_available(plan.backend)) {
    KernelTimer timer(ctx.profiler(), KernelGroup::Gemm);
    const GemmWorkspace::Lease scratch = ctx.gemm_workspace().lease();
    return gemm_bf16_out_onednn(*scratch, trans_a, trans_b, M, N, K, A, lda, B, ldb, bias,
                                accumulate, C, ldc);
  }
  // Staged: f32 rows of C (bias, or C's old values, or nothing), the f32 GEMM onto them, one
  // narrowing pass. The f32 buffer is the whole (M, N) result.
  Tensor c32 = ctx.empty({M, N}, DType::F32, MemCategory::Workspace);
  float* cp = c32.f32();
  const cpu::ConvertIsa path = cpu::convert_path(ctx.cpu_isa());
  const bool threaded = !omp_in_parallel();
#pragma omp parallel for schedule(static) if (threaded)
  for (int64_t i = 0; i < M; ++i) {
    float* row = cp + i * N;
    if (accumulate) {
      cpu::widen_to_f32(path, DType::BF16, C + i * ldc, row, N);
      if (bias)
        for (int64_t j = 0; j < N; ++j) row[j] += bias[j];
    } else if (bias) {
      std::copy(bias, bias + N, row);
    }
  }
  gemm_bf16(ctx, trans_a, trans_b, M, N, K, 1.0f, A, lda, B, ldb, accumulate || bias ? 1.0f : 0.0f,
            cp, N);
  KernelTimer timer(ctx.profiler(), KernelGroup::Elementwise);
#pragma omp parallel for schedule(static) if (threaded)
  for (int64_t i = 0; i < M; ++i)
    cpu::narrow_from_f32(path, DType::BF16, cp + i * N, C + i * ldc, N);
}

void gemm_f16(ExecContext& ctx, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
              float alpha, const f16* A, int64_t lda, const f16* B, int64_t ldb, float beta,
              float* C, int64_t ldc) {
  BRAID_CHECK(ctx.device().is_cpu(), "gemm_f16 on {}: no CUDA GEMM yet", ctx.device().str());
  KernelTimer timer(ctx.profiler(), KernelGroup::Gemm);
  if (M <= 0 || N <= 0) return;
  if (K <= 0) return scale_c(M, N, beta, C, ldc);
  const GemmWorkspace::Lease scratch = ctx.gemm_workspace().lease();
  const cpu::ConvertIsa path = cpu::convert_path(ctx.cpu_isa());
  const int64_t a_cols = trans_a ? M : K, b_cols = trans_b ? K : N;
  const float* a = widen(path, A, trans_a ? K : M, a_cols, lda, scratch->a_buf);
  const float* bw = widen(path, B, trans_b ? N : K, b_cols, ldb, scratch->b_buf);
  gemm_f32_with(ctx, ctx.gemm().backend, trans_a, trans_b, M, N, K, alpha, a, a_cols, bw, b_cols,
                beta, C, ldc);
}

std::string gemm_bf16_description(const ExecContext& ctx) {
  const GemmPlan& plan = ctx.gemm();
  const std::string_view lib = gemm_backend_label(plan.backend);
  if (plan.bf16_mode == Bf16Mode::Native && native_bf16_available(plan.backend))
    return fmt::format("bf16 GEMM: native ({} bf16 matmul)", lib);
  std::string why;
  if (!native_bf16_available(plan.backend))
    why = native_bf16_missing(plan.backend);
  else if (ctx.cpu_isa() < CpuIsa::Avx512Bf16 && ctx.cpu_isa() == cpu_isa_detected())
    why = "this CPU has no AVX512_BF16/AMX bf16 dot products";
  else if (ctx.cpu_isa() < CpuIsa::Avx512Bf16)
    why =
        fmt::format("instruction set capped at {}, below AVX512_BF16", cpu_isa_name(ctx.cpu_isa()));
  else if (plan.backend == GemmBackend::OneDnn && !onednn_has_native_bf16())
    why = fmt::format("oneDNN runs at {}, without bf16 dot products", onednn_isa_name());
  else
    why = "the plan asks for widening";
  return fmt::format("bf16 GEMM: widened to f32 in front of {} sgemm ({})", lib, why);
}

std::string gemm_backend_name(const GemmPlan& plan) {
  return std::string(gemm_backend_label(plan.backend));
}

double measure_gemm_peak_f32(ExecContext& ctx, double seconds) {
  constexpr int64_t n = 1024;
  AlignedVector<float> a(n * n), b(n * n), c(n * n);  // aligned as training's tensors are
  for (int64_t i = 0; i < n * n; ++i) {
    a[i] = static_cast<float>((i * 7) % 13) * 0.01f;
    b[i] = static_cast<float>((i * 5) % 11) * 0.01f;
  }
  return best_gemm_rate(n, seconds, [&] {
    gemm_f32(ctx, false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
  });
}

double measure_gemm_peak_bf16(ExecContext& ctx, double seconds) {
  constexpr int64_t n = 1024;
  AlignedVector<bf16> a(n * n), b(n * n);  // aligned as training's tensors are
  AlignedVector<float> c(n * n);
  for (int64_t i = 0; i < n * n; ++i) {
    a[i] = float_to_bf16(static_cast<float>((i * 7) % 13) * 0.01f);
    b[i] = float_to_bf16(static_cast<float>((i * 5) % 11) * 0.01f);
  }
  return best_gemm_rate(n, seconds, [&] {
    gemm_bf16(ctx, false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
  });
}

}  // namespace braid
