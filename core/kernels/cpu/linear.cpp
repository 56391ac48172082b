// CPU linear layer y = x W^T + b on top of gemm_f32 (gemm_bf16/gemm_f16 for 16-bit storage);
// backward split into input and weight parts.
#include <algorithm>
#include <cstdint>

#include "core/kernels/cpu/chunked_sum.h"
#include "core/kernels/cpu/cpu_checks.h"
#include "core/kernels/cpu/cpu_kernels.h"
#include "core/kernels/cpu/fast_math.h"
#include "core/kernels/cpu/lowp.h"
#include "core/kernels/gemm.h"
#include "core/profile.h"

namespace braid {

namespace cpu {

namespace {

// sums (OUT) = rows[0] + rows[1] + ... + rows[n - 1], bf16 rows of OUT widened inside the sum
// (one pass over the rows; the same additions in the same order as widening each row first).
BRAID_CPU_CLONES void sum_bf16_rows(float* sums, const bf16* rows, int64_t n, int64_t OUT) {
#pragma omp simd
  for (int64_t c = 0; c < OUT; ++c) sums[c] = bf16_to_float(rows[c]);
  for (int64_t r = 1; r < n; ++r) {
    const bf16* row = rows + r * OUT;
#pragma omp simd
    for (int64_t c = 0; c < OUT; ++c) sums[c] += bf16_to_float(row[c]);
  }
}

// db (OUT, f32) += column sums of dy (N, OUT; f32, bf16 or f16). Fixed row chunks
// (thread-count independent) so that all rows are spread over all threads even when OUT is
// small; f16 rows are widened one at a time into the chunk's sums.
void bias_grad(ExecContext& ctx, Tensor& db, const Tensor& dy) {
  const int64_t N = dy.dim(0), OUT = dy.dim(1);
  const int64_t chunk_rows = cpu::rows_per_chunk(N);
  const int64_t chunks = (N + chunk_rows - 1) / chunk_rows;
  Tensor partial = ctx.empty({chunks, OUT}, DType::F32, MemCategory::Workspace);
  float* pp = partial.f32();  // partial: (chunks, OUT)
  const TileIo io(ctx);
  const bool bf16_rows = dy.dtype() == DType::BF16;
#pragma omp parallel
  {
    const TileBuffers bufs(ctx, dy.dtype() == DType::F16, 1, OUT);
    float* buf = bufs[0];
#pragma omp for schedule(static)
    for (int64_t k = 0; k < chunks; ++k) {
      float* pk = pp + k * OUT;
      const int64_t r0 = k * chunk_rows, r1 = std::min(N, r0 + chunk_rows);
      if (bf16_rows) {
        sum_bf16_rows(pk, dy.data<bf16>() + r0 * OUT, r1 - r0, OUT);
        continue;
      }
      const float* first = io.in(dy, r0 * OUT, OUT, buf);
#pragma omp simd
      for (int64_t c = 0; c < OUT; ++c) pk[c] = first[c];
      for (int64_t r = r0 + 1; r < r1; ++r) {
        const float* row = io.in(dy, r * OUT, OUT, buf);
#pragma omp simd
        for (int64_t c = 0; c < OUT; ++c) pk[c] += row[c];
      }
    }
  }
  cpu::add_chunk_partials(db.f32(), pp, chunks, OUT, OUT);
}

bool is_low(DType t) { return t == DType::BF16 || t == DType::F16; }

// C = alpha op(A) op(B) + beta C with A and B both bf16 or both f16, C f32: the bf16 GEMM is
// native where the CPU has bf16 dot products (gemm.cpp decides), f16 is widened.
void gemm_16(ExecContext& ctx, DType t, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
             const void* A, int64_t lda, const void* B, int64_t ldb, float beta, float* C,
             int64_t ldc) {
  if (t == DType::BF16)
    return gemm_bf16(ctx, ta, tb, M, N, K, 1.0f, static_cast<const bf16*>(A), lda,
                     static_cast<const bf16*>(B), ldb, beta, C, ldc);
  gemm_f16(ctx, ta, tb, M, N, K, 1.0f, static_cast<const f16*>(A), lda, static_cast<const f16*>(B),
           ldb, beta, C, ldc);
}

// Both GEMM operands in the same 16-bit dtype: they go to the GEMM as they are. Anything else
// (mixed storage) takes the generic staged path.
bool gemm_operands_16(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && is_low(a.dtype());
}

void check_2d(const Tensor& t, const char* op, const char* name) {
  check_cpu(t, op, name);
  BRAID_CHECK(t.ndim() == 2, "{}: {} must be 2-d, got {}", op, name, t.str());
}

void linear_forward_16(ExecContext& ctx, Tensor& y, const Tensor& x, const Tensor& w,
                       const Tensor& b, bool accumulate) {
  const char* op = "linear_forward";
  F32Staging s(ctx, op);
  if (!gemm_operands_16(x, w)) {
    Tensor y32 = s.out(y, "y", accumulate);
    cpu::linear_forward(ctx, y32, s.in(x, "x"), s.in(w, "w"), s.in(b, "b"), accumulate);
    return s.finish();
  }
  check_2d(x, op, "x");
  check_2d(w, op, "w");
  const int64_t N = x.dim(0), IN = x.dim(1), OUT = w.dim(0);
  check_shape(w, {OUT, IN}, "linear_forward w");
  check_shape(y, {N, OUT}, "linear_forward y");
  const Tensor b32 = s.in(b, "b");
  if (b32.defined()) check_shape(b32, {OUT}, "linear_forward b");
  if (IN > 0 && x.dtype() == DType::BF16 && y.dtype() == DType::BF16) {
    // bf16 in and out: the GEMM writes (or adds onto) y itself, bias added in f32 before the
    // one rounding.
    return gemm_bf16_to_bf16(ctx, false, true, N, OUT, IN, x.data<bf16>(), IN, w.data<bf16>(), IN,
                             b32.defined() ? b32.f32() : nullptr, accumulate, y.data<bf16>(), OUT);
  }
  Tensor y32 = s.out(y, "y", accumulate);
  float* yp = y32.f32();  // y: (N, OUT)
  if (b32.defined()) {    // (never with accumulate: the dispatch refuses that)
    const float* bp = b32.f32();
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < N; ++r) std::copy(bp, bp + OUT, yp + r * OUT);
  } else if (IN == 0 && !accumulate) {
    y32.zero_();
  }
  if (IN > 0)
    gemm_16(ctx, x.dtype(), false, true, N, OUT, IN, x.raw(), IN, w.raw(), IN,
            b32.defined() || accumulate ? 1.0f : 0.0f, yp, OUT);
  s.finish();
}

void linear_backward_input_16(ExecContext& ctx, Tensor& dx, const Tensor& dy, const Tensor& w,
                              bool accumulate) {
  const char* op = "linear_backward_input";
  F32Staging s(ctx, op);
  if (!gemm_operands_16(dy, w)) {
    Tensor dx32 = s.out(dx, "dx", accumulate);
    cpu::linear_backward_input(ctx, dx32, s.in(dy, "dy"), s.in(w, "w"), accumulate);
    return s.finish();
  }
  check_2d(dy, op, "dy");
  check_2d(w, op, "w");
  const int64_t N = dy.dim(0), OUT = dy.dim(1), IN = w.dim(1);
  check_shape(w, {OUT, IN}, "linear_backward_input w");
  check_shape(dx, {N, IN}, "linear_backward_input dx");
  if (OUT > 0 && dy.dtype() == DType::BF16 && dx.dtype() == DType::BF16) {
    // bf16 in and out: the GEMM writes (or adds onto) dx itself, one rounding.
    return gemm_bf16_to_bf16(ctx, false, false, N, IN, OUT, dy.data<bf16>(), OUT, w.data<bf16>(),
                             IN, nullptr, accumulate, dx.data<bf16>(), IN);
  }
  Tensor dx32 = s.out(dx, "dx", accumulate);
  if (OUT == 0) {
    if (!accumulate) dx32.zero_();
  } else {
    gemm_16(ctx, dy.dtype(), false, false, N, IN, OUT, dy.raw(), OUT, w.raw(), IN,
            accumulate ? 1.0f : 0.0f, dx32.f32(), IN);
  }
  s.finish();
}

void linear_backward_weight_16(ExecContext& ctx, Tensor& dw, Tensor& db, const Tensor& dy,
                               const Tensor& x, bool overwrite) {
  const char* op = "linear_backward_weight";
  F32Staging s(ctx, op);
  Tensor dw32 = s.out(dw, "dw", !overwrite), db32 = s.out(db, "db", !overwrite);
  if (!gemm_operands_16(dy, x)) {
    cpu::linear_backward_weight(ctx, dw32, db32, s.in(dy, "dy"), s.in(x, "x"), overwrite);
    return s.finish();
  }
  check_2d(dy, op, "dy");
  check_2d(x, op, "x");
  const int64_t N = dy.dim(0), OUT = dy.dim(1), IN = x.dim(1);
  check_shape(x, {N, IN}, "linear_backward_weight x");
  if (dw32.defined()) check_shape(dw32, {OUT, IN}, "linear_backward_weight dw");
  if (db32.defined()) check_shape(db32, {OUT}, "linear_backward_weight db");
  if (overwrite) {  // what the GEMM does not write below: an empty sum, and the bias sums
    if (N == 0 && dw32.defined()) dw32.zero_();
    if (db32.defined()) db32.zero_();
  }
  if (N > 0 && dw32.defined())
    gemm_16(ctx, dy.dtype(), true, false, OUT, IN, N, dy.raw(), OUT, x.raw(), IN,
            overwrite ? 0.0f : 1.0f, dw32.f32(), IN);
  if (N > 0 && db32.defined() && OUT > 0) bias_grad(ctx, db32, dy);
  s.finish();
}

}  // namespace

void linear_forward(ExecContext& ctx, Tensor& y, const Tensor& x, const Tensor& w, const Tensor& b,
                    bool accumulate) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Elementwise);
  if (any_low_precision({&y, &x, &w, &b})) return linear_forward_16(ctx, y, x, w, b, accumulate);
  const char* op = "linear_forward";
  cpu::check_f32(y, op, "y");
  cpu::check_f32(x, op, "x");
  cpu::check_f32(w, op, "w");
  if (b.defined()) cpu::check_f32(b, op, "b");
  BRAID_CHECK(x.ndim() == 2, "{}: x must be (N, IN), got {}", op, x.str());
  BRAID_CHECK(w.ndim() == 2, "{}: w must be (OUT, IN), got {}", op, w.str());
  const int64_t N = x.dim(0), IN = x.dim(1), OUT = w.dim(0);
  check_shape(w, {OUT, IN}, "linear_forward w");
  check_shape(y, {N, OUT}, "linear_forward y");
  if (b.defined()) check_shape(b, {OUT}, "linear_forward b");
  float* yp = y.f32();  // y: (N, OUT)
  if (accumulate) {     // (never with a bias: the dispatch refuses that)
    if (IN > 0)
      gemm_f32(ctx, false, true, N, OUT, IN, 1.0f, x.f32(), IN, w.f32(), IN, 1.0f, yp, OUT);
    return;
  }
  if (b.defined()) {
    // The bias in the GEMM (its epilogue, or written first and added onto).
    gemm_f32_bias(ctx, false, true, N, OUT, IN, x.f32(), IN, w.f32(), IN, b.f32(), yp, OUT);
    return;
  }
  if (IN == 0) {  // an empty sum; do not rely on the GEMM for K == 0
    y.zero_();
    return;
  }
  gemm_f32(ctx, false, true, N, OUT, IN, 1.0f, x.f32(), IN, w.f32(), IN, 0.0f, yp, OUT);
}

void linear_backward_input(ExecContext& ctx, Tensor& dx, const Tensor& dy, const Tensor& w,
                           bool accumulate) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Elementwise);
  if (any_low_precision({&dx, &dy, &w}))
    return linear_backward_input_16(ctx, dx, dy, w, accumulate);
  const char* op = "linear_backward_input";
  cpu::check_f32(dx, op, "dx");
  cpu::check_f32(dy, op, "dy");
  cpu::check_f32(w, op, "w");
  BRAID_CHECK(dy.ndim() == 2, "{}: dy must be (N, OUT), got {}", op, dy.str());
  BRAID_CHECK(w.ndim() == 2, "{}: w must be (OUT, IN), got {}", op, w.str());
  const int64_t N = dy.dim(0), OUT = dy.dim(1), IN = w.dim(1);
  check_shape(w, {OUT, IN}, "linear_backward_input w");
  check_shape(dx, {N, IN}, "linear_backward_input dx");
  if (OUT == 0) {  // an empty sum; do not rely on the GEMM for K == 0
    if (!accumulate) dx.zero_();
    return;
  }
  gemm_f32(ctx, false, false, N, IN, OUT, 1.0f, dy.f32(), OUT, w.f32(), IN,
           accumulate ? 1.0f : 0.0f, dx.f32(), IN);
}

void linear_backward_weight(ExecContext& ctx, Tensor& dw, Tensor& db, const Tensor& dy,
                            const Tensor& x, bool overwrite) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Elementwise);
  if (any_low_precision({&dw, &db, &dy, &x}))
    return linear_backward_weight_16(ctx, dw, db, dy, x, overwrite);
  const char* op = "linear_backward_weight";
  if (dw.defined()) cpu::check_f32(dw, op, "dw");
  if (db.defined()) cpu::check_f32(db, op, "db");
  cpu::check_f32(dy, op, "dy");
  cpu::check_f32(x, op, "x");
  BRAID_CHECK(dy.ndim() == 2, "{}: dy must be (N, OUT), got {}", op, dy.str());
  BRAID_CHECK(x.ndim() == 2, "{}: x must be (N, IN), got {}", op, x.str());
  const int64_t N = dy.dim(0), OUT = dy.dim(1), IN = x.dim(1);
  check_shape(x, {N, IN}, "linear_backward_weight x");
  if (dw.defined()) check_shape(dw, {OUT, IN}, "linear_backward_weight dw");
  if (db.defined()) check_shape(db, {OUT}, "linear_backward_weight db");
  if (overwrite) {  // what the GEMM does not write below: an empty sum, and the bias sums
    if (N == 0 && dw.defined()) dw.zero_();
    if (db.defined()) db.zero_();
  }
  if (N == 0) return;  // nothing to add
  if (dw.defined())
    gemm_f32(ctx, true, false, OUT, IN, N, 1.0f, dy.f32(), OUT, x.f32(), IN,
             overwrite ? 0.0f : 1.0f, dw.f32(), IN);
  if (!db.defined() || OUT == 0) return;

  bias_grad(ctx, db, dy);
}

}  // namespace cpu
}  // namespace braid
