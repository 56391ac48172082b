// CUDA linear layer y = x W^T + b (core/kernels/linear.h): cuBLASLt GEMMs with the CPU's
// arithmetic, f32 accumulation with each output rounded once. Operands of one dtype go to the
// GEMM as they are (bf16/f16 on tensor cores, f32 as true f32 unless TF32 is allowed); a call
// mixing dtypes runs on f32 copies, as the CPU does (f32_staging.h).
#include <cuda_runtime.h>

#include <cstdint>

#include "core/kernels/cuda/blas.h"
#include "core/kernels/cuda/cuda_kernels.h"
#include "core/kernels/cuda/f32_staging.h"
#include "core/kernels/cuda/linear.h"
#include "core/kernels/cuda/ops_util.h"
#include "core/profile.h"

namespace braid::cuda {

namespace {

void check_2d(const Tensor& t, const char* op, const char* name) {
  check_float(t, op, name);
  BRAID_CHECK(t.ndim() == 2, "{}: {} must be 2-d, got {}", op, name, t.str());
}

// A GEMM with operands of dtype `ab` can write c directly: f32 or that dtype (or no c at all).
bool writable(const Tensor& c, DType ab) {
  return !c.defined() || c.dtype() == DType::F32 || c.dtype() == ab;
}

}  // namespace

void linear_forward(ExecContext& ctx, Tensor& y, const Tensor& x, const Tensor& w, const Tensor& b,
                    bool accumulate) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Elementwise);
  const char* op = "linear_forward";
  check_2d(x, op, "x");
  check_2d(w, op, "w");
  check_float(y, op, "y");
  if (b.defined()) check_float(b, op, "b");
  const int64_t N = x.dim(0), IN = x.dim(1), OUT = w.dim(0);
  check_shape(w, {OUT, IN}, "linear_forward w");
  check_shape(y, {N, OUT}, "linear_forward y");
  if (b.defined()) check_shape(b, {OUT}, "linear_forward b");
  const DType ab = x.dtype();
  // The bias is written into y and the GEMM adds onto it: exact when y is f32 or b has y's dtype.
  const bool bias_exact = !b.defined() || y.dtype() == DType::F32 || b.dtype() == y.dtype();
  if (w.dtype() != ab || !writable(y, ab) || !bias_exact) {
    F32Staging s(ctx);
    Tensor y32 = s.out(y, accumulate);
    cuda::linear_forward(ctx, y32, s.in(x), s.in(w), s.in(b), accumulate);
    return s.finish();
  }
  // y += x w^T onto y (never with a bias: the dispatch refuses that): f32 sum, one rounding.
  if (accumulate) {
    if (IN > 0)
      gemm(ctx, false, true, N, OUT, IN, 1.0f, x.raw(), IN, w.raw(), IN, 1.0f, y.raw(), OUT, ab,
           y.dtype());
    return;
  }
  // The bias in the GEMM's epilogue (added in f32, y rounded once, as on the CPU) where cuBLASLt
  // has one for the shape; else written into y first and the GEMM adds onto it.
  // (A bias inside a flat buffer may start anywhere: the epilogue gets 16-byte aligned ones.)
  if (b.defined() && IN > 0 && (b.dtype() == DType::F32 || b.dtype() == y.dtype()) &&
      reinterpret_cast<uintptr_t>(b.raw()) % 16 == 0 &&
      gemm_bias(ctx, false, true, N, OUT, IN, 1.0f, x.raw(), IN, w.raw(), IN, y.raw(), OUT, ab,
                y.dtype(), b.raw(), b.dtype()))
    return;
  float beta = 0.0f;
  if (b.defined()) {
    launch_broadcast_rows(stream_of(ctx), y.raw(), code(y), b.raw(), code(b), N, OUT);
    check_launch(op);
    beta = 1.0f;
  }
  if (IN == 0) {  // an empty sum: y is the bias, or zero
    if (!b.defined()) cuda::zero(ctx, y);
    return;
  }
  gemm(ctx, false, true, N, OUT, IN, 1.0f, x.raw(), IN, w.raw(), IN, beta, y.raw(), OUT, ab,
       y.dtype());
}

void linear_backward_input(ExecContext& ctx, Tensor& dx, const Tensor& dy, const Tensor& w,
                           bool accumulate) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Elementwise);
  const char* op = "linear_backward_input";
  check_2d(dy, op, "dy");
  check_2d(w, op, "w");
  check_float(dx, op, "dx");
  const int64_t N = dy.dim(0), OUT = dy.dim(1), IN = w.dim(1);
  check_shape(w, {OUT, IN}, "linear_backward_input w");
  check_shape(dx, {N, IN}, "linear_backward_input dx");
  const DType ab = dy.dtype();
  if (w.dtype() != ab || !writable(dx, ab)) {
    F32Staging s(ctx);
    Tensor dx32 = s.out(dx, accumulate);
    cuda::linear_backward_input(ctx, dx32, s.in(dy), s.in(w), accumulate);
    return s.finish();
  }
  if (OUT == 0) {  // an empty sum
    if (!accumulate) cuda::zero(ctx, dx);
    return;
  }
  // dx (N, IN) = dy (N, OUT) @ w (OUT, IN)
  gemm(ctx, false, false, N, IN, OUT, 1.0f, dy.raw(), OUT, w.raw(), IN, accumulate ? 1.0f : 0.0f,
       dx.raw(), IN, ab, dx.dtype());
}

void linear_backward_weight(ExecContext& ctx, Tensor& dw, Tensor& db, const Tensor& dy,
                            const Tensor& x, bool overwrite) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Elementwise);
  const char* op = "linear_backward_weight";
  check_2d(dy, op, "dy");
  check_2d(x, op, "x");
  if (dw.defined()) check_float(dw, op, "dw");
  if (db.defined()) check_float(db, op, "db");
  const int64_t N = dy.dim(0), OUT = dy.dim(1), IN = x.dim(1);
  check_shape(x, {N, IN}, "linear_backward_weight x");
  if (dw.defined()) check_shape(dw, {OUT, IN}, "linear_backward_weight dw");
  if (db.defined()) check_shape(db, {OUT}, "linear_backward_weight db");
  const DType ab = dy.dtype();
  if ((dw.defined() && x.dtype() != ab) || !writable(dw, ab) || !writable(db, ab)) {
    F32Staging s(ctx);
    Tensor dw32 = s.out(dw, !overwrite), db32 = s.out(db, !overwrite);
    cuda::linear_backward_weight(ctx, dw32, db32, s.in(dy), s.in(x), overwrite);
    return s.finish();
  }
  const float beta = overwrite ? 0.0f : 1.0f;  // overwrite: old contents are not read
  // N == 0: nothing to add; an overwrite writes the empty sums.
  if (N == 0) {
    if (overwrite && dw.defined()) cuda::zero(ctx, dw);
    if (overwrite && db.defined()) cuda::zero(ctx, db);
    return;
  }
  // dw (OUT, IN) (+)= dy^T (OUT, N) @ x (N, IN)
  if (dw.defined())
    gemm(ctx, true, false, OUT, IN, N, 1.0f, dy.raw(), OUT, x.raw(), IN, beta, dw.raw(), IN, ab,
         dw.dtype());
  if (!db.defined() || OUT == 0) return;
  // db (1, OUT) += ones (1, N) @ dy (N, OUT): the column sums as a GEMM, f32 accumulation of
  // the exact f32 values even where TF32 is allowed (the CPU's and PyTorch's sums).
  Tensor ones = ctx.empty({N}, ab, MemCategory::Workspace);
  launch_fill(stream_of(ctx), ones.raw(), code(ones), 1.0f, N);
  check_launch(op);
  gemm(ctx, false, false, 1, OUT, N, 1.0f, ones.raw(), N, dy.raw(), OUT, beta, db.raw(), OUT, ab,
       db.dtype(), true);
}

}  // namespace braid::cuda
