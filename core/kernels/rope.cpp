// rope: argument checks and device dispatch of the public kernels (core/kernels/rope.h).
#include "core/kernels/rope.h"

#include "core/kernels/cpu/cpu_kernels.h"
#include "core/kernels/dispatch.h"

namespace braid {

void rope_forward(ExecContext& ctx, Tensor& x, int64_t pos_offset, const RopeScaling& rope) {
  KernelArgs args(ctx, "rope_forward", {{&x, "x"}});
  args.require_cpu();
  cpu::rope_forward(ctx, x, pos_offset, rope);
}

void rope_backward(ExecContext& ctx, Tensor& dx, int64_t pos_offset, const RopeScaling& rope) {
  KernelArgs args(ctx, "rope_backward", {{&dx, "dx"}});
  args.require_cpu();
  cpu::rope_backward(ctx, dx, pos_offset, rope);
}

}  // namespace braid
