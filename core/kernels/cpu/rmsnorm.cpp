// CPU RMSNorm over the last dimension, forward and backward (rows in parallel); the per-element
// formulas are core/kernels/math/norms.h, shared with the CUDA kernels.
#include <algorithm>
#include <cmath>
#include <utility>

#include "core/kernels/cpu/chunked_sum.h"
#include "core/kernels/cpu/cpu_checks.h"
#include "core/kernels/cpu/cpu_kernels.h"
#include "core/kernels/cpu/lowp.h"
#include "core/kernels/math/norms.h"
#include "core/profile.h"

namespace braid {

namespace cpu {

void rmsnorm_forward(ExecContext& ctx, Tensor& y, Tensor& rstd, const Tensor& x, const Tensor& w,
                     float eps) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Elementwise);
  const char* op = "rmsnorm_forward";
  cpu::check_f32(rstd, op, "rstd");
  cpu::check_float_args(op, {{&x, "x"}, {&w, "w"}, {&y, "y"}});
  BRAID_CHECK(x.ndim() == 2, "{}: x must be (N, C), got {}", op, x.str());
  const int64_t N = x.dim(0), C = x.dim(1);
  check_shape(y, {N, C}, "rmsnorm_forward y");
  check_shape(w, {C}, "rmsnorm_forward w");
  check_shape(rstd, {N}, "rmsnorm_forward rstd");
  // 16-bit x and y rows are converted one at a time inside the row loop; w is widened once.
  F32Staging st(ctx, op);
  const Tensor w32 = st.in(w, "w");
  const float* wp = w32.f32();  // w: (C)
  float* rp = rstd.f32();       // rstd: (N)
  const float inv_c = 1.0f / static_cast<float>(C);
  const TileIo io(ctx);
  const bool low = any_low_precision({&x, &y});
#pragma omp parallel
  {
    const TileBuffers buf(ctx, low, 2, C);  // x and y rows
#pragma omp for schedule(static)
    for (int64_t r = 0; r < N; ++r) {
      const float* xr = io.in(x, r * C, C, buf[0]);  // x: (N, C)
      float* yr = io.out(y, r * C, buf[1]);          // y: (N, C)
      float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
      for (int64_t c = 0; c < C; ++c) ss += xr[c] * xr[c];
      const float rs = math::norm_rstd(ss * inv_c, eps);
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) yr[c] = math::rmsnorm_y(xr[c], rs, wp[c]);
      io.store(y, r * C, C, yr);
      rp[r] = rs;
    }
  }
}

// With xhat = x rstd and g = dy w:  dx = rstd (g - xhat mean_c(g xhat)),  dw += sum_rows dy xhat.
// dw is summed per fixed chunk of rows and the partials added in chunk order (thread-count
// independent).
void rmsnorm_backward(ExecContext& ctx, Tensor& dx, Tensor& dw, const Tensor& dy, const Tensor& x,
                      const Tensor& w, const Tensor& rstd) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Elementwise);
  const char* op = "rmsnorm_backward";
  cpu::check_float_args(op, {{&dy, "dy"}, {&x, "x"}, {&w, "w"}, {&dx, "dx"}});
  if (dw.defined()) cpu::check_float_storage(dw, op, "dw");
  cpu::check_f32(rstd, op, "rstd");
  BRAID_CHECK(x.ndim() == 2, "{}: x must be (N, C), got {}", op, x.str());
  const int64_t N = x.dim(0), C = x.dim(1);
  check_shape(dy, {N, C}, "rmsnorm_backward dy");
  check_shape(dx, {N, C}, "rmsnorm_backward dx");
  check_shape(w, {C}, "rmsnorm_backward w");
  if (dw.defined()) check_shape(dw, {C}, "rmsnorm_backward dw");
  check_shape(rstd, {N}, "rmsnorm_backward rstd");
  if (N == 0 || C == 0) return;
  const bool weight_grad = dw.defined();  // frozen: no partial sums at all

  // w and dw (C values) are staged whole; the (N, C) rows of dy, x and dx are converted one at
  // a time inside the loop when 16-bit.
  F32Staging st(ctx, op);
  const Tensor w32 = st.in(w, "w");
  Tensor dw32 = st.out(dw, "dw", true);
  const int64_t chunk_rows = cpu::rows_per_chunk(N);
  const int64_t chunks = (N + chunk_rows - 1) / chunk_rows;
  // per chunk: dw partial sums
  Tensor partial =
      weight_grad ? ctx.empty({chunks, C}, DType::F32, MemCategory::Workspace) : Tensor();
  const float* wp = w32.f32();                        // w: (C)
  const float* rp = rstd.f32();                       // rstd: (N)
  float* pp = weight_grad ? partial.f32() : nullptr;  // partial: (chunks, C)
  const float inv_c = 1.0f / static_cast<float>(C);
  const TileIo io(ctx);
  const bool low = any_low_precision({&dx, &dy, &x});

#pragma omp parallel
  {
    const TileBuffers buf(ctx, low, 3, C);  // dy, x and dx rows
#pragma omp for schedule(static)
    for (int64_t k = 0; k < chunks; ++k) {
      float* pw = weight_grad ? pp + k * C : nullptr;
      if (weight_grad) {
#pragma omp simd
        for (int64_t c = 0; c < C; ++c) pw[c] = 0.0f;
      }
      const int64_t r_end = std::min(N, (k + 1) * chunk_rows);
      for (int64_t r = k * chunk_rows; r < r_end; ++r) {
        const float* dyr = io.in(dy, r * C, C, buf[0]);  // dy: (N, C)
        const float* xr = io.in(x, r * C, C, buf[1]);    // x: (N, C)
        float* dxr = io.out(dx, r * C, buf[2]);          // dx: (N, C)
        const float rs = rp[r];
        float sgx = 0.0f;
#pragma omp simd reduction(+ : sgx)
        for (int64_t c = 0; c < C; ++c) sgx += dyr[c] * wp[c] * xr[c];
        const float mgx = sgx * rs * inv_c;
        if (weight_grad) {
#pragma omp simd
          for (int64_t c = 0; c < C; ++c) {
            const float xhat = xr[c] * rs;
            const float d = dyr[c];
            pw[c] += d * xhat;
            dxr[c] = math::rmsnorm_dx(d, wp[c], xhat, rs, mgx);
          }
        } else {
#pragma omp simd
          for (int64_t c = 0; c < C; ++c)
            dxr[c] = math::rmsnorm_dx(dyr[c], wp[c], xr[c] * rs, rs, mgx);
        }
        io.store(dx, r * C, C, dxr);
      }
    }
  }
  if (weight_grad) cpu::add_chunk_partials(dw32.f32(), pp, chunks, C, C);
  st.finish();
}

}  // namespace cpu
}  // namespace braid
