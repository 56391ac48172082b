// CUDA dropout (core/kernels/dropout.h) on the context's stream: the CPU kernel's checks and
// constants, then dropout.cu's launcher. Unlike the CPU kernel (f32 only), x and y may also be
// bf16/f16: the mask is the same, the kept values are x * (1 / (1 - p)) rounded once.
#include "core/kernels/cuda/cuda_kernels.h"
#include "core/kernels/cuda/dropout.h"
#include "core/kernels/cuda/ops_util.h"
#include "core/kernels/math/counter_rng.h"
#include "core/profile.h"

namespace braid::cuda {

void dropout_apply(ExecContext& ctx, Tensor& y, const Tensor& x, float p, uint64_t seed,
                   uint64_t stream, DropoutWindow window) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Elementwise);
  check_float(y, "dropout_apply", "y");
  check_float(x, "dropout_apply", "x");
  check_shape(y, x.shape(), "dropout_apply y");
  const float keep_scale = 1.0f / (1.0f - p);
  const int64_t cols = window.full_cols > 0 ? x.dim(-1) : 1;
  launch_dropout(stream_of(ctx), y.raw(), code(y), x.raw(), code(x), x.numel(), p, keep_scale,
                 math::hash_combine(seed, stream), cols, window.full_cols, window.col_offset);
  check_launch("dropout_apply");
}

}  // namespace braid::cuda
