// CPU LayerNorm over the last dimension, forward and backward (rows in parallel); the
// per-element formulas are core/kernels/math/norms.h, shared with the CUDA kernels.
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

void layernorm_forward(ExecContext& ctx, Tensor& y, Tensor& mean, Tensor& rstd, const Tensor& x,
                       const Tensor& w, const Tensor& b, float eps) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Elementwise);
  const char* op = "layernorm_forward";
  cpu::check_f32(mean, op, "mean");
  cpu::check_f32(rstd, op, "rstd");
  cpu::check_float_args(op, {{&x, "x"}, {&w, "w"}, {&b, "b"}, {&y, "y"}});
  BRAID_CHECK(x.ndim() == 2, "{}: x must be (N, C), got {}", op, x.str());
  const int64_t N = x.dim(0), C = x.dim(1);
  check_shape(y, {N, C}, "layernorm_forward y");
  check_shape(w, {C}, "layernorm_forward w");
  check_shape(b, {C}, "layernorm_forward b");
  check_shape(mean, {N}, "layernorm_forward mean");
  check_shape(rstd, {N}, "layernorm_forward rstd");
  // 16-bit x and y rows are converted one at a time inside the row loop; w and b (C values)
  // are widened once.
  F32Staging st(ctx, op);
  const Tensor w32 = st.in(w, "w"), b32 = st.in(b, "b");
  const float* wp = w32.f32();  // w: (C)
  const float* bp = b32.f32();  // b: (C)
  float* mp = mean.f32();       // mean: (N)
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
      float s = 0.0f;
#pragma omp simd reduction(+ : s)
      for (int64_t c = 0; c < C; ++c) s += xr[c];
      const float m = s * inv_c;
      // Two passes (the row is in L1 by now) so that a large mean does not cancel the variance.
      float v = 0.0f;
#pragma omp simd reduction(+ : v)
      for (int64_t c = 0; c < C; ++c) v += (xr[c] - m) * (xr[c] - m);
      const float rs = math::norm_rstd(v * inv_c, eps);
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) yr[c] = math::layernorm_y(xr[c], m, rs, wp[c], bp[c]);
      io.store(y, r * C, C, yr);
      mp[r] = m;
      rp[r] = rs;
    }
  }
}

// With xhat = (x - mean) rstd and g = dy w:
//   dx = rstd (g - mean_c(g) - xhat mean_c(g xhat)),  dw += sum_rows dy xhat,  db += sum_rows dy.
// dw/db are summed per fixed chunk of rows, then the chunk partials are added in chunk order,
// so the result does not depend on the thread count.
void layernorm_backward(ExecContext& ctx, Tensor& dx, Tensor& dw, Tensor& db, const Tensor& dy,
                        const Tensor& x, const Tensor& w, const Tensor& mean, const Tensor& rstd) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Elementwise);
  const char* op = "layernorm_backward";
  cpu::check_float_args(op, {{&dy, "dy"}, {&x, "x"}, {&w, "w"}, {&dx, "dx"}});
  for (auto [t, name] : {std::pair{&dw, "dw"}, {&db, "db"}})
    if (t->defined()) cpu::check_float_storage(*t, op, name);
  for (auto [t, name] : {std::pair{&mean, "mean"}, {&rstd, "rstd"}}) cpu::check_f32(*t, op, name);
  BRAID_CHECK(x.ndim() == 2, "{}: x must be (N, C), got {}", op, x.str());
  const int64_t N = x.dim(0), C = x.dim(1);
  check_shape(dy, {N, C}, "layernorm_backward dy");
  check_shape(dx, {N, C}, "layernorm_backward dx");
  check_shape(w, {C}, "layernorm_backward w");
  if (dw.defined()) check_shape(dw, {C}, "layernorm_backward dw");
  if (db.defined()) check_shape(db, {C}, "layernorm_backward db");
  check_shape(mean, {N}, "layernorm_backward mean");
  check_shape(rstd, {N}, "layernorm_backward rstd");
  if (N == 0 || C == 0) return;
  const bool weight_grads = dw.defined() || db.defined();  // frozen: no partial sums at all

  // w and the parameter gradients (C values each) are staged whole; the (N, C) rows of dy, x
  // and dx are converted one at a time inside the loop when 16-bit.
  F32Staging st(ctx, op);
  const Tensor w32 = st.in(w, "w");
  Tensor dw32 = st.out(dw, "dw", true), db32 = st.out(db, "db", true);
  const int64_t chunk_rows = cpu::rows_per_chunk(N);
  const int64_t chunks = (N + chunk_rows - 1) / chunk_rows;
  // per chunk: dw then db partial sums
  Tensor partial =
      weight_grads ? ctx.empty({chunks, 2, C}, DType::F32, MemCategory::Workspace) : Tensor();
  const float* wp = w32.f32();                         // w: (C)
  const float* mp = mean.f32();                        // mean: (N)
  const float* rp = rstd.f32();                        // rstd: (N)
  float* pp = weight_grads ? partial.f32() : nullptr;  // partial: (chunks, 2, C)
  const float inv_c = 1.0f / static_cast<float>(C);
  const TileIo io(ctx);
  const bool low = any_low_precision({&dx, &dy, &x});

#pragma omp parallel
  {
    const TileBuffers buf(ctx, low, 3, C);  // dy, x and dx rows
#pragma omp for schedule(static)
    for (int64_t k = 0; k < chunks; ++k) {
      float* pw = weight_grads ? pp + k * 2 * C : nullptr;
      float* pb = weight_grads ? pw + C : nullptr;
      if (weight_grads) {
#pragma omp simd
        for (int64_t c = 0; c < C; ++c) pw[c] = pb[c] = 0.0f;
      }
      const int64_t r_end = std::min(N, (k + 1) * chunk_rows);
      for (int64_t r = k * chunk_rows; r < r_end; ++r) {
        const float* dyr = io.in(dy, r * C, C, buf[0]);  // dy: (N, C)
        const float* xr = io.in(x, r * C, C, buf[1]);    // x: (N, C)
        float* dxr = io.out(dx, r * C, buf[2]);          // dx: (N, C)
        const float m = mp[r], rs = rp[r];
        float sg = 0.0f, sgx = 0.0f;
#pragma omp simd reduction(+ : sg, sgx)
        for (int64_t c = 0; c < C; ++c) {
          const float g = dyr[c] * wp[c];
          sg += g;
          sgx += g * (xr[c] - m) * rs;
        }
        const float mg = sg * inv_c, mgx = sgx * inv_c;
        if (weight_grads) {
#pragma omp simd
          for (int64_t c = 0; c < C; ++c) {
            const float xhat = (xr[c] - m) * rs;
            const float d = dyr[c];
            pw[c] += d * xhat;
            pb[c] += d;
            dxr[c] = math::layernorm_dx(d, wp[c], xhat, rs, mg, mgx);
          }
        } else {
#pragma omp simd
          for (int64_t c = 0; c < C; ++c) {
            const float xhat = (xr[c] - m) * rs;
            dxr[c] = math::layernorm_dx(dyr[c], wp[c], xhat, rs, mg, mgx);
          }
        }
        io.store(dx, r * C, C, dxr);
      }
    }
  }

  if (dw32.defined()) cpu::add_chunk_partials(dw32.f32(), pp, chunks, 2 * C, C);
  if (db32.defined()) cpu::add_chunk_partials(db32.f32(), pp + C, chunks, 2 * C, C);
  st.finish();
}

}  // namespace cpu
}  // namespace braid
