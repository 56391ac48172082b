// layernorm: argument checks and device dispatch of the public kernels (core/kernels/layernorm.h).
#include "core/kernels/layernorm.h"

#include "core/kernels/cpu/cpu_kernels.h"
#include "core/kernels/cuda/cuda_kernels.h"
#include "core/kernels/dispatch.h"

namespace braid {

void layernorm_forward(ExecContext& ctx, Tensor& y, Tensor& mean, Tensor& rstd, const Tensor& x,
                       const Tensor& w, const Tensor& b, float eps) {
  KernelArgs args(ctx, "layernorm_forward",
                  {{&y, "y"}, {&mean, "mean"}, {&rstd, "rstd"}, {&x, "x"}, {&w, "w"}, {&b, "b"}});
  BRAID_DISPATCH(args, layernorm_forward, ctx, y, mean, rstd, x, w, b, eps);
}

void layernorm_backward(ExecContext& ctx, Tensor& dx, Tensor& dw, Tensor& db, const Tensor& dy,
                        const Tensor& x, const Tensor& w, const Tensor& mean, const Tensor& rstd) {
  KernelArgs args(ctx, "layernorm_backward",
                  {{&dx, "dx"},
                   {&dw, "dw"},
                   {&db, "db"},
                   {&dy, "dy"},
                   {&x, "x"},
                   {&w, "w"},
                   {&mean, "mean"},
                   {&rstd, "rstd"}});
  BRAID_DISPATCH(args, layernorm_backward, ctx, dx, dw, db, dy, x, w, mean, rstd);
}

}  // namespace braid
