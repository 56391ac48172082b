// CUDA LayerNorm and RMSNorm (core/kernels/layernorm.h, rmsnorm.h) on the context's stream:
// the CPU kernels' argument checks, then the launchers of norms.cu. The weight-gradient chunks
// are the CPU's (core/kernels/cpu/chunked_sum.h), so both backends sum in the same order.
#include <utility>

#include "core/kernels/cpu/chunked_sum.h"
#include "core/kernels/cuda/cuda_kernels.h"
#include "core/kernels/cuda/norms.h"
#include "core/kernels/cuda/ops_util.h"
#include "core/profile.h"

namespace braid::cuda {

namespace {

void check_f32_stat(const Tensor& t, const char* op, const char* name) {
  BRAID_CHECK(t.defined() && t.dtype() == DType::F32, "{}: {} is {}; expected f32 here", op, name,
              t.str());
}

// x (N, C) and its row count, column count.
std::pair<int64_t, int64_t> rows_cols(const Tensor& x, const char* op) {
  BRAID_CHECK(x.ndim() == 2, "{}: x must be (N, C), got {}", op, x.str());
  return {x.dim(0), x.dim(1)};
}

float* f32_ptr(Tensor& t) { return static_cast<float*>(t.raw()); }
const float* f32_ptr(const Tensor& t) { return static_cast<const float*>(t.raw()); }

}  // namespace

void layernorm_forward(ExecContext& ctx, Tensor& y, Tensor& mean, Tensor& rstd, const Tensor& x,
                       const Tensor& w, const Tensor& b, float eps) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Elementwise);
  const char* op = "layernorm_forward";
  check_float(y, op, "y");
  check_float(x, op, "x");
  check_float(w, op, "w");
  check_float(b, op, "b");
  check_f32_stat(mean, op, "mean");
  check_f32_stat(rstd, op, "rstd");
  const auto [N, C] = rows_cols(x, op);
  check_shape(y, {N, C}, "layernorm_forward y");
  check_shape(w, {C}, "layernorm_forward w");
  check_shape(b, {C}, "layernorm_forward b");
  check_shape(mean, {N}, "layernorm_forward mean");
  check_shape(rstd, {N}, "layernorm_forward rstd");
  launch_layernorm_forward(stream_of(ctx), y.raw(), code(y), f32_ptr(mean), f32_ptr(rstd), x.raw(),
                           code(x), w.raw(), code(w), b.raw(), code(b), N, C, eps);
  check_launch(op);
}

// The weight partials run before dx, so dx may be dy (as on the CPU, where each element's dy is
// read before its dx is written).
void layernorm_backward(ExecContext& ctx, Tensor& dx, Tensor& dw, Tensor& db, const Tensor& dy,
                        const Tensor& x, const Tensor& w, const Tensor& mean, const Tensor& rstd) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Elementwise);
  const char* op = "layernorm_backward";
  check_float(dx, op, "dx");
  if (dw.defined()) check_float(dw, op, "dw");
  if (db.defined()) check_float(db, op, "db");
  check_float(dy, op, "dy");
  check_float(x, op, "x");
  check_float(w, op, "w");
  check_f32_stat(mean, op, "mean");
  check_f32_stat(rstd, op, "rstd");
  const auto [N, C] = rows_cols(x, op);
  check_shape(dy, {N, C}, "layernorm_backward dy");
  check_shape(dx, {N, C}, "layernorm_backward dx");
  check_shape(w, {C}, "layernorm_backward w");
  if (dw.defined()) check_shape(dw, {C}, "layernorm_backward dw");
  if (db.defined()) check_shape(db, {C}, "layernorm_backward db");
  check_shape(mean, {N}, "layernorm_backward mean");
  check_shape(rstd, {N}, "layernorm_backward rstd");
  if (N == 0 || C == 0) return;
  void* s = stream_of(ctx);
  if (dw.defined() || db.defined()) {  // frozen: no partial sums at all
    const int64_t chunk_rows = cpu::rows_per_chunk(N);
    const int64_t chunks = (N + chunk_rows - 1) / chunk_rows;
    Tensor partial = ctx.empty({chunks, 2, C}, DType::F32, MemCategory::Workspace);
    float* p = f32_ptr(partial);  // partial: (chunks, 2, C), dw then db
    launch_norm_weight_partials(s, p, dy.raw(), code(dy), x.raw(), code(x), f32_ptr(mean),
                                f32_ptr(rstd), N, C, chunk_rows);
    if (dw.defined()) launch_add_chunk_partials(s, dw.raw(), code(dw), p, chunks, 2 * C, C);
    if (db.defined()) launch_add_chunk_partials(s, db.raw(), code(db), p + C, chunks, 2 * C, C);
  }
  launch_norm_backward_dx(s, dx.raw(), code(dx), dy.raw(), code(dy), x.raw(), code(x), w.raw(),
                          code(w), f32_ptr(mean), f32_ptr(rstd), N, C);
  check_launch(op);
}

void rmsnorm_forward(ExecContext& ctx, Tensor& y, Tensor& rstd, const Tensor& x, const Tensor& w,
                     float eps) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Elementwise);
  const char* op = "rmsnorm_forward";
  check_float(y, op, "y");
  check_float(x, op, "x");
  check_float(w, op, "w");
  check_f32_stat(rstd, op, "rstd");
  const auto [N, C] = rows_cols(x, op);
  check_shape(y, {N, C}, "rmsnorm_forward y");
  check_shape(w, {C}, "rmsnorm_forward w");
  check_shape(rstd, {N}, "rmsnorm_forward rstd");
  launch_rmsnorm_forward(stream_of(ctx), y.raw(), code(y), f32_ptr(rstd), x.raw(), code(x), w.raw(),
                         code(w), N, C, eps);
  check_launch(op);
}

void rmsnorm_backward(ExecContext& ctx, Tensor& dx, Tensor& dw, const Tensor& dy, const Tensor& x,
                      const Tensor& w, const Tensor& rstd) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Elementwise);
  const char* op = "rmsnorm_backward";
  check_float(dx, op, "dx");
  if (dw.defined()) check_float(dw, op, "dw");
  check_float(dy, op, "dy");
  check_float(x, op, "x");
  check_float(w, op, "w");
  check_f32_stat(rstd, op, "rstd");
  const auto [N, C] = rows_cols(x, op);
  check_shape(dy, {N, C}, "rmsnorm_backward dy");
  check_shape(dx, {N, C}, "rmsnorm_backward dx");
  check_shape(w, {C}, "rmsnorm_backward w");
  if (dw.defined()) check_shape(dw, {C}, "rmsnorm_backward dw");
  check_shape(rstd, {N}, "rmsnorm_backward rstd");
  if (N == 0 || C == 0) return;
  void* s = stream_of(ctx);
  if (dw.defined()) {  // frozen: no partial sums at all
    const int64_t chunk_rows = cpu::rows_per_chunk(N);
    const int64_t chunks = (N + chunk_rows - 1) / chunk_rows;
    Tensor partial = ctx.empty({chunks, C}, DType::F32, MemCategory::Workspace);
    float* p = f32_ptr(partial);  // partial: (chunks, C)
    launch_norm_weight_partials(s, p, dy.raw(), code(dy), x.raw(), code(x), nullptr, f32_ptr(rstd),
                                N, C, chunk_rows);
    launch_add_chunk_partials(s, dw.raw(), code(dw), p, chunks, C, C);
  }
  launch_norm_backward_dx(s, dx.raw(), code(dx), dy.raw(), code(dy), x.raw(), code(x), w.raw(),
                          code(w), nullptr, f32_ptr(rstd), N, C);
  check_launch(op);
}

}  // namespace braid::cuda
