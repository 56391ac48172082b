// rmsnorm: argument checks and device dispatch of the public kernels (core/kernels/rmsnorm.h).
#include "core/kernels/rmsnorm.h"

#include "core/kernels/cpu/cpu_kernels.h"
#include "core/kernels/cuda/cuda_kernels.h"
#include "core/kernels/dispatch.h"

namespace braid {

void rmsnorm_forward(ExecContext& ctx, Tensor& y, Tensor& rstd, const Tensor& x, const Tensor& w,
                     float eps) {
  KernelArgs args(ctx, "rmsnorm_forward", {{&y, "y"}, {&rstd, "rstd"}, {&x, "x"}, {&w, "w"}});
  BRAID_DISPATCH(args, rmsnorm_forward, ctx, y, rstd, x, w, eps);
}

void rmsnorm_backward(ExecContext& ctx, Tensor& dx, Tensor& dw, const Tensor& dy, const Tensor& x,
                      const Tensor& w, const Tensor& rstd) {
  KernelArgs args(ctx, "rmsnorm_backward",
                  {{&dx, "dx"}, {&dw, "dw"}, {&dy, "dy"}, {&x, "x"}, {&w, "w"}, {&rstd, "rstd"}});
  BRAID_DISPATCH(args, rmsnorm_backward, ctx, dx, dw, dy, x, w, rstd);
}

}  // namespace braid
