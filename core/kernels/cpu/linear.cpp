// CPU linear layer y = x W^T + b on top of gemm_f32; backward split into input and weight parts.
#include <algorithm>

#include "core/kernels/cpu/chunked_sum.h"
#include "core/kernels/cpu/cpu_checks.h"
#include "core/kernels/cpu/cpu_kernels.h"
#include "core/kernels/gemm.h"
#include "core/profile.h"

namespace braid {

namespace cpu {

void linear_forward(ExecContext& ctx, Tensor& y, const Tensor& x, const Tensor& w,
                    const Tensor& b) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Elementwise);
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
  float beta = 0.0f;
  if (b.defined()) {
    // Writing the bias first and letting the GEMM add onto it (beta = 1) costs one write pass
    // over y instead of a read-modify-write pass after the GEMM.
    const float* bp = b.f32();  // b: (OUT)
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < N; ++r) std::copy(bp, bp + OUT, yp + r * OUT);
    beta = 1.0f;
  }
  if (IN == 0) {  // an empty sum; do not rely on the GEMM for K == 0
    if (!b.defined()) y.zero_();
    return;
  }
  gemm_f32(ctx, false, true, N, OUT, IN, 1.0f, x.f32(), IN, w.f32(), IN, beta, yp, OUT);
}

void linear_backward_input(ExecContext& ctx, Tensor& dx, const Tensor& dy, const Tensor& w,
                           bool accumulate) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Elementwise);
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

// db's column sums use fixed row chunks (thread-count independent) so that all rows are
// spread over all threads even when OUT is small.
void linear_backward_weight(ExecContext& ctx, Tensor& dw, Tensor& db, const Tensor& dy,
                            const Tensor& x) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Elementwise);
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
  if (N == 0) return;  // nothing to add
  if (dw.defined())
    gemm_f32(ctx, true, false, OUT, IN, N, 1.0f, dy.f32(), OUT, x.f32(), IN, 1.0f, dw.f32(), IN);
  if (!db.defined() || OUT == 0) return;

  const int64_t chunk_rows = cpu::rows_per_chunk(N);
  const int64_t chunks = (N + chunk_rows - 1) / chunk_rows;
  Tensor partial = ctx.empty({chunks, OUT}, DType::F32, MemCategory::Workspace);
  const float* dyp = dy.f32();  // dy: (N, OUT)
  float* pp = partial.f32();    // partial: (chunks, OUT)
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < chunks; ++k) {
    float* pk = pp + k * OUT;
    const int64_t r0 = k * chunk_rows, r1 = std::min(N, r0 + chunk_rows);
#pragma omp simd
    for (int64_t c = 0; c < OUT; ++c) pk[c] = dyp[r0 * OUT + c];
    for (int64_t r = r0 + 1; r < r1; ++r) {
#pragma omp simd
      for (int64_t c = 0; c < OUT; ++c) pk[c] += dyp[r * OUT + c];
    }
  }
  cpu::add_chunk_partials(db.f32(), pp, chunks, OUT, OUT);
}

}  // namespace cpu
}  // namespace braid
