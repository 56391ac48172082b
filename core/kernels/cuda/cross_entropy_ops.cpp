// CUDA softmax cross-entropy (core/kernels/cross_entropy.h): the LM head fused with the loss in
// row chunks, the loss sum, and the steps of the vocab-parallel cross-entropy.
//
// The fused head per chunk of rows: logits (rows, V) f32 = x w^T (cuBLASLt, f32 accumulation);
// one kernel writes the losses and turns the logits into grad_scale (softmax - onehot); then
// dx = dlogits w and dw += dlogits^T x. With 16-bit weights the gradient is rounded to their
// dtype for those two GEMMs (tensor cores; the CPU keeps it in f32, a difference of one
// rounding per element); losses and softmax are f32 on both.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "core/kernels/cuda/blas.h"
#include "core/kernels/cuda/cross_entropy.h"
#include "core/kernels/cuda/cuda_kernels.h"
#include "core/kernels/cuda/f32_staging.h"
#include "core/kernels/cuda/ops_util.h"
#include "core/profile.h"

namespace braid::cuda {

namespace {

cudaStream_t cuda_stream(ExecContext& ctx) { return static_cast<cudaStream_t>(stream_of(ctx)); }

void check_dtype_of(const Tensor& t, DType dtype, const char* op, const char* name) {
  BRAID_CHECK(t.defined() && t.dtype() == dtype, "{}: {} is {}; expected {}", op, name,
              t.defined() ? t.str() : std::string("undefined"), dtype_name(dtype));
}

// Throws, naming the first, when a target is outside [-1, limit). One wait for the stream.
void check_targets_range(ExecContext& ctx, const Tensor& targets, int64_t limit, const char* op) {
  const int64_t n = targets.numel();
  if (n == 0) return;
  Tensor bad = ctx.empty({4}, DType::I32, MemCategory::Workspace);  // two int64
  auto* d = static_cast<int64_t*>(bad.raw());
  launch_find_bad_target(stream_of(ctx), d, targets.i32(), n, limit);
  check_launch(op);
  int64_t host[2] = {0, 0};
  CUDA_CHECK(cudaMemcpyAsync(host, d, sizeof(host), cudaMemcpyDeviceToHost, cuda_stream(ctx)));
  ctx.stream().synchronize();
  BRAID_CHECK(host[0] == n, "{}: targets[{}] = {} is outside [-1, {}) for vocabulary size {}", op,
              host[0], host[1], limit, limit);
}

// An (N) f32 vector of row statistics.
void check_stat(const Tensor& t, int64_t N, const char* op, const char* name) {
  check_dtype_of(t, DType::F32, op, name);
  BRAID_CHECK(t.ndim() == 1 && t.dim(0) == N, "{}: {} must be ({}), got {}", op, name, N, t.str());
}

void check_targets(const Tensor& targets, int64_t N, const char* op) {
  check_dtype_of(targets, DType::I32, op, "targets");
  BRAID_CHECK(targets.ndim() == 1 && targets.dim(0) == N, "{}: targets must be ({}) i32, got {}",
              op, N, targets.str());
}

// An (N, rows) f32 logits block; returns N.
int64_t check_block(const Tensor& logits, const char* op) {
  check_dtype_of(logits, DType::F32, op, "logits");
  BRAID_CHECK(logits.ndim() == 2, "{}: logits must be (N, rows), got {}", op, logits.str());
  return logits.dim(0);
}

}  // namespace

void lm_head_cross_entropy(ExecContext& ctx, Tensor& losses, Tensor& dx, Tensor& dw,
                           const Tensor& x, const Tensor& w, const Tensor& targets,
                           float grad_scale) {
  KernelTimer timer(ctx.profiler(), KernelGroup::LmHead, Nested::Absorb);
  const char* op = "lm_head_cross_entropy";
  check_float(x, op, "x");
  check_float(w, op, "w");
  check_dtype_of(targets, DType::I32, op, "targets");
  check_dtype_of(losses, DType::F32, op, "losses");
  BRAID_CHECK(x.ndim() == 2 && w.ndim() == 2, "{}: x {} and w {} must be 2-d", op, x.str(),
              w.str());
  const int64_t N = x.dim(0), C = x.dim(1), V = w.dim(0);
  check_shape(w, {V, C}, "w");
  check_shape(targets, {N}, "targets");
  check_shape(losses, {N}, "losses");
  const bool backward = dx.defined();
  if (backward) {
    check_float(dx, op, "dx");
    check_shape(dx, {N, C}, "dx");
    if (dw.defined()) {  // undefined: a frozen head, whose weight-gradient GEMM is skipped
      check_float(dw, op, "dw");
      check_shape(dw, {V, C}, "dw");
    }
  }
  const DType ab = w.dtype();
  // f32 stand-ins where the GEMMs cannot take a tensor as it is: x of another dtype than w, dx
  // neither f32 nor w's dtype, and a 16-bit dw, which must add every chunk in f32 and be rounded
  // once (as the CPU does).
  const bool stage_x = x.dtype() != ab;
  const bool stage_dx = backward && dx.dtype() != DType::F32 && dx.dtype() != ab;
  const bool stage_dw = backward && dw.defined() && dw.dtype() != DType::F32;
  if (stage_x || stage_dx || stage_dw) {
    F32Staging s(ctx);
    Tensor dx2 = stage_dx ? s.out(dx) : dx, dw2 = stage_dw ? s.out(dw, true) : dw;
    cuda::lm_head_cross_entropy(ctx, losses, dx2, dw2, stage_x ? s.in(x) : x, stage_x ? s.in(w) : w,
                                targets, grad_scale);
    return s.finish();
  }
  // Every target is checked before anything is written, so a bad batch leaves dw untouched.
  check_targets_range(ctx, targets, V, op);
  if (N == 0) return;
  BRAID_CHECK(V > 0, "{}: empty vocabulary (w is {})", op, w.str());

  const int64_t chunk = lm_head_chunk_rows(N, V);
  Tensor logits = ctx.empty({chunk, V}, DType::F32, MemCategory::Workspace);  // (chunk, V)
  // The gradient in the operands' dtype, or over the logits when that is f32.
  Tensor grad = !backward          ? Tensor()
                : ab == DType::F32 ? logits
                                   : ctx.empty({chunk, V}, ab, MemCategory::Workspace);
  for (int64_t r0 = 0; r0 < N; r0 += chunk) {
    const int64_t rows = std::min(chunk, N - r0);
    const Tensor x_chunk = x.slice0(r0, r0 + rows);  // (rows, C)
    if (C > 0) {
      gemm(ctx, false, true, rows, V, C, 1.0f, x_chunk.raw(), C, w.raw(), C, 0.0f, logits.raw(), V,
           ab, DType::F32);
    } else {  // an empty sum: every logit is 0
      CUDA_CHECK(cudaMemsetAsync(logits.raw(), 0, static_cast<size_t>(rows * V) * sizeof(float),
                                 cuda_stream(ctx)));
    }
    launch_xent_rows(stream_of(ctx), logits.f32(), backward ? grad.raw() : nullptr,
                     backward ? code(grad) : 0, losses.f32() + r0, targets.i32() + r0, rows, V,
                     grad_scale);
    check_launch(op);
    if (!backward) continue;
    Tensor dx_chunk = dx.slice0(r0, r0 + rows);  // (rows, C)
    // dx (rows, C) = dlogits (rows, V) @ w (V, C)
    gemm(ctx, false, false, rows, C, V, 1.0f, grad.raw(), V, w.raw(), C, 0.0f, dx_chunk.raw(), C,
         ab, dx.dtype());
    // dw (V, C) += dlogits^T (V, rows) @ x (rows, C)
    if (dw.defined())
      gemm(ctx, true, false, V, C, rows, 1.0f, grad.raw(), V, x_chunk.raw(), C, 1.0f, dw.raw(), C,
           ab, dw.dtype());
  }
}

int64_t lm_head_chunk_rows(ExecContext& /*ctx*/, int64_t n, int64_t vocab) {
  return lm_head_chunk_rows(n, vocab);
}

bool lm_head_rounds_grad(ExecContext& /*ctx*/, DType w) {
  return w == DType::BF16 || w == DType::F16;
}

void check_loss_targets(ExecContext& ctx, const Tensor& targets, int64_t vocab, const char* op) {
  check_dtype_of(targets, DType::I32, op, "targets");
  check_targets_range(ctx, targets, vocab, op);
}

LossSum loss_sum(ExecContext& ctx, const Tensor& losses, const Tensor& targets) {
  KernelTimer timer(ctx.profiler(), KernelGroup::LmHead);
  const char* op = "loss_sum";
  check_dtype_of(losses, DType::F32, op, "losses");
  check_dtype_of(targets, DType::I32, op, "targets");
  check_shape(targets, {losses.numel()}, "loss_sum targets");
  const int64_t n = losses.numel();
  if (n == 0) return {};
  Tensor out = ctx.empty({4}, DType::I32, MemCategory::Workspace);  // two doubles
  launch_loss_sum(stream_of(ctx), static_cast<double*>(out.raw()), losses.f32(), targets.i32(), n);
  check_launch(op);
  double host[2] = {0.0, 0.0};
  CUDA_CHECK(
      cudaMemcpyAsync(host, out.raw(), sizeof(host), cudaMemcpyDeviceToHost, cuda_stream(ctx)));
  ctx.stream().synchronize();
  return {host[0], static_cast<int64_t>(host[1])};
}

void vocab_slice_partials(ExecContext& ctx, Tensor& row_max, Tensor& target_logit,
                          const Tensor& logits, const Tensor& targets, const VocabSlice& slice) {
  KernelTimer timer(ctx.profiler(), KernelGroup::LmHead);
  const char* op = "vocab_slice_partials";
  const int64_t N = check_block(logits, op), rows = logits.dim(1);
  check_stat(row_max, N, op, "row_max");
  check_stat(target_logit, N, op, "target_logit");
  check_targets(targets, N, op);
  if (!slice.targets_checked) check_targets_range(ctx, targets, slice.vocab, op);
  launch_vocab_slice_partials(stream_of(ctx), row_max.f32(), target_logit.f32(), logits.f32(),
                              targets.i32(), N, rows, slice.real(rows), slice.row_begin);
  check_launch(op);
}

void vocab_slice_exp(ExecContext& ctx, Tensor& logits, Tensor& sum_exp, const Tensor& row_max,
                     const VocabSlice& slice) {
  KernelTimer timer(ctx.profiler(), KernelGroup::LmHead);
  const char* op = "vocab_slice_exp";
  const int64_t N = check_block(logits, op), rows = logits.dim(1);
  check_stat(sum_exp, N, op, "sum_exp");
  check_stat(row_max, N, op, "row_max");
  launch_vocab_slice_exp(stream_of(ctx), logits.f32(), sum_exp.f32(), row_max.f32(), N, rows,
                         slice.real(rows));
  check_launch(op);
}

void vocab_slice_losses(ExecContext& ctx, Tensor& losses, const Tensor& sum_exp,
                        const Tensor& row_max, const Tensor& target_logit, const Tensor& targets) {
  KernelTimer timer(ctx.profiler(), KernelGroup::LmHead);
  const char* op = "vocab_slice_losses";
  const int64_t N = losses.numel();
  check_stat(losses, N, op, "losses");
  check_stat(sum_exp, N, op, "sum_exp");
  check_stat(row_max, N, op, "row_max");
  check_stat(target_logit, N, op, "target_logit");
  check_targets(targets, N, op);
  launch_vocab_slice_losses(stream_of(ctx), losses.f32(), sum_exp.f32(), row_max.f32(),
                            target_logit.f32(), targets.i32(), N);
  check_launch(op);
}

void vocab_slice_grad(ExecContext& ctx, Tensor& logits, const Tensor& sum_exp,
                      const Tensor& targets, const VocabSlice& slice, float grad_scale) {
  KernelTimer timer(ctx.profiler(), KernelGroup::LmHead);
  const char* op = "vocab_slice_grad";
  const int64_t N = check_block(logits, op), rows = logits.dim(1);
  check_stat(sum_exp, N, op, "sum_exp");
  check_targets(targets, N, op);
  launch_vocab_slice_grad(stream_of(ctx), logits.f32(), sum_exp.f32(), targets.i32(), N, rows,
                          slice.real(rows), slice.row_begin, grad_scale);
  check_launch(op);
}

}  // namespace braid::cuda
