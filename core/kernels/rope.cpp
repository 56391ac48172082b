// rope: argument checks and device dispatch of the public kernels (core/kernels/rope.h).
#include "core/kernels/rope.h"

#include "core/kernels/cpu/cpu_kernels.h"
#include "core/kernels/cuda/cuda_kernels.h"
#include "core/kernels/dispatch.h"

namespace braid {

namespace {

// The CUDA kernel takes a plain theta for now; the scaled types' frequencies (rope_freq.h)
// are for it to share when it takes a RopeScaling.
void run_rope(ExecContext& ctx, Tensor& x, int64_t pos_offset, const RopeScaling& rope,
              bool backward) {
  const char* op = backward ? "rope_backward" : "rope_forward";
  KernelArgs args(ctx, op, {{&x, backward ? "dx" : "x"}});
  if (args.on_cpu())
    return backward ? cpu::rope_backward(ctx, x, pos_offset, rope)
                    : cpu::rope_forward(ctx, x, pos_offset, rope);
  if (rope.type != RopeType::Default)
    user_error("{} on {}: rope_type {} has no CUDA kernel yet (default only)", op,
               ctx.device().str(), enum_name(rope.type));
#if BRAID_WITH_CUDA
  const float theta = static_cast<float>(rope.theta);
  backward ? cuda::rope_backward(ctx, x, pos_offset, theta)
           : cuda::rope_forward(ctx, x, pos_offset, theta);
#else
  args.cuda_absent<void>();
#endif
}

}  // namespace

void rope_forward(ExecContext& ctx, Tensor& x, int64_t pos_offset, const RopeScaling& rope) {
  run_rope(ctx, x, pos_offset, rope, false);
}

void rope_backward(ExecContext& ctx, Tensor& dx, int64_t pos_offset, const RopeScaling& rope) {
  run_rope(ctx, dx, pos_offset, rope, true);
}

}  // namespace braid
