// cross_entropy: argument checks and device dispatch of the public kernels
// (core/kernels/cross_entropy.h).
#include "core/kernels/cross_entropy.h"

#include "core/kernels/cpu/cpu_kernels.h"
#include "core/kernels/dispatch.h"

namespace braid {

void lm_head_cross_entropy(ExecContext& ctx, Tensor& losses, Tensor& dx, Tensor& dw,
                           const Tensor& x, const Tensor& w, const Tensor& targets,
                           float grad_scale) {
  KernelArgs args(
      ctx, "lm_head_cross_entropy",
      {{&losses, "losses"}, {&dx, "dx"}, {&dw, "dw"}, {&x, "x"}, {&w, "w"}, {&targets, "targets"}});
  args.require_cpu();
  cpu::lm_head_cross_entropy(ctx, losses, dx, dw, x, w, targets, grad_scale);
}

LossSum loss_sum(ExecContext& ctx, const Tensor& losses, const Tensor& targets) {
  KernelArgs args(ctx, "loss_sum", {{&losses, "losses"}, {&targets, "targets"}});
  args.require_cpu();
  return cpu::loss_sum(ctx, losses, targets);
}

}  // namespace braid
