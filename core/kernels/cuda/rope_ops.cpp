// CUDA rotary position embedding (core/kernels/rope.h) on the context's stream: the CPU kernel's
// checks, the per-call cos/sin table, then the in-place rotation (rope.cu).
#include "core/kernels/cuda/cuda_kernels.h"
#include "core/kernels/cuda/ops_util.h"
#include "core/kernels/cuda/rope.h"
#include "core/profile.h"

namespace braid::cuda {

namespace {

// sign +1: the forward rotation; -1: its transpose (the gradient map).
void rope_rotate(ExecContext& ctx, Tensor& x, int64_t pos_offset, float theta, float sign,
                 const char* op) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Elementwise);
  check_float(x, op, "x");
  BRAID_CHECK(x.ndim() == 4, "{}: x must be (B, T, H, D), got {}", op, x.str());
  const int64_t B = x.dim(0), T = x.dim(1), H = x.dim(2), D = x.dim(3);
  BRAID_CHECK(D % 2 == 0, "{}: head dim D must be even, got {}", op, D);
  BRAID_CHECK(theta > 0.0f, "{}: theta must be positive, got {}", op, theta);
  BRAID_CHECK(pos_offset >= 0, "{}: pos_offset must be >= 0, got {}", op, pos_offset);
  if (x.numel() == 0) return;
  Tensor table = ctx.empty({T, 2, D / 2}, DType::F32, MemCategory::Workspace);
  float* tab = static_cast<float*>(table.raw());  // table: (T, 2, D/2), cos then sign * sin
  launch_rope_table(stream_of(ctx), tab, T, D, pos_offset, theta, sign);
  launch_rope_rotate(stream_of(ctx), x.raw(), code(x), tab, B, T, H, D);
  check_launch(op);
}

}  // namespace

void rope_forward(ExecContext& ctx, Tensor& x, int64_t pos_offset, float theta) {
  rope_rotate(ctx, x, pos_offset, theta, 1.0f, "rope_forward");
}

void rope_backward(ExecContext& ctx, Tensor& dx, int64_t pos_offset, float theta) {
  rope_rotate(ctx, dx, pos_offset, theta, -1.0f, "rope_backward");
}

}  // namespace braid::cuda
