// rope: argument checks and device dispatch of the public kernels (core/kernels/rope.h).
#include "core/kernels/rope.h"

#include "core/kernels/cpu/cpu_kernels.h"
#include "core/kernels/cuda/cuda_kernels.h"
#include "core/kernels/dispatch.h"

namespace braid {

namespace {

void run_rope(ExecContext& ctx, Tensor& x, int64_t pos_offset, const RopeScaling& rope,
              bool backward) {
  const char* op = backward ? "rope_backward" : "rope_forward";
  KernelArgs args(ctx, op, {{&x, backward ? "dx" : "x"}});
  if (args.on_cpu())
    return backward ? cpu::rope_backward(ctx, x, pos_offset, rope)
                    : cpu::rope_forward(ctx, x, pos_offset, rope);
#if BRAID_WITH_CUDA
  backward ? cuda::rope_backward(ctx, x, pos_offset, rope)
           : cuda::rope_forward(ctx, x, pos_offset, rope);
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
