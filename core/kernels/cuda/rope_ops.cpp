// CUDA rotary position embedding (core/kernels/rope.h) on the context's stream: the CPU kernel's
// checks, the pair frequencies of the rope type (the CPU's code, copied to the device), the
// per-call cos/sin table, then the in-place rotation (rope.cu).
#include <vector>

#include "core/kernels/cuda/cuda_kernels.h"
#include "core/kernels/cuda/ops_util.h"
#include "core/kernels/cuda/rope.h"
#include "core/kernels/cuda/runtime.h"
#include "core/kernels/rope_freq.h"
#include "core/profile.h"

namespace braid::cuda {

namespace {

// sign +1: the forward rotation; -1: its transpose (the gradient map).
void rope_rotate(ExecContext& ctx, Tensor& x, int64_t pos_offset, const RopeScaling& rope,
                 float sign, const char* op) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Elementwise);
  check_float(x, op, "x");
  BRAID_CHECK(x.ndim() == 4, "{}: x must be (B, T, H, D), got {}", op, x.str());
  const int64_t B = x.dim(0), T = x.dim(1), H = x.dim(2), D = x.dim(3);
  BRAID_CHECK(D % 2 == 0, "{}: head dim D must be even, got {}", op, D);
  BRAID_CHECK(rope.theta > 0.0, "{}: theta must be positive, got {}", op, rope.theta);
  BRAID_CHECK(
      rope.type == RopeType::Default || rope.type == RopeType::Linear || rope.original_context > 0,
      "{}: rope type {} needs the original context length", op, enum_name(rope.type));
  BRAID_CHECK(pos_offset >= 0, "{}: pos_offset must be >= 0, got {}", op, pos_offset);
  if (x.numel() == 0) return;
  const int64_t half = D / 2;
  std::vector<double> freq(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) freq[static_cast<size_t>(i)] = rope_inv_freq(rope, i, D);
  // D/2 doubles as raw bytes (2 f32 slots each); a pageable copy returns once staged.
  Tensor dfreq = ctx.empty({2 * half}, DType::F32, MemCategory::Workspace);
  cuda::copy_async(dfreq.raw(), freq.data(), freq.size() * sizeof(double), stream_of(ctx));
  Tensor table = ctx.empty({T, 2, half}, DType::F32, MemCategory::Workspace);
  float* tab = static_cast<float*>(table.raw());  // table: (T, 2, D/2), cos then sign * sin
  launch_rope_table(stream_of(ctx), tab, static_cast<const double*>(dfreq.raw()), T, D, pos_offset,
                    rope_attention_scaling(rope), sign);
  launch_rope_rotate(stream_of(ctx), x.raw(), code(x), tab, B, T, H, D);
  check_launch(op);
}

}  // namespace

void rope_forward(ExecContext& ctx, Tensor& x, int64_t pos_offset, const RopeScaling& rope) {
  rope_rotate(ctx, x, pos_offset, rope, 1.0f, "rope_forward");
}

void rope_backward(ExecContext& ctx, Tensor& dx, int64_t pos_offset, const RopeScaling& rope) {
  rope_rotate(ctx, dx, pos_offset, rope, -1.0f, "rope_backward");
}

}  // namespace braid::cuda
