// linear: argument checks and device dispatch of the public kernels (core/kernels/linear.h).
#include "core/kernels/linear.h"

#include "core/kernels/cpu/cpu_kernels.h"
#include "core/kernels/cuda/cuda_kernels.h"
#include "core/kernels/dispatch.h"

namespace braid {

void linear_forward(ExecContext& ctx, Tensor& y, const Tensor& x, const Tensor& w, const Tensor& b,
                    bool accumulate) {
  KernelArgs args(ctx, "linear_forward", {{&y, "y"}, {&x, "x"}, {&w, "w"}, {&b, "b"}});
  BRAID_CHECK(!accumulate || !b.defined(),
              "linear_forward: accumulate adds x W^T onto y and takes no bias (b is {})", b.str());
  BRAID_DISPATCH(args, linear_forward, ctx, y, x, w, b, accumulate);
}

void linear_backward_input(ExecContext& ctx, Tensor& dx, const Tensor& dy, const Tensor& w,
                           bool accumulate) {
  KernelArgs args(ctx, "linear_backward_input", {{&dx, "dx"}, {&dy, "dy"}, {&w, "w"}});
  BRAID_DISPATCH(args, linear_backward_input, ctx, dx, dy, w, accumulate);
}

void linear_backward_weight(ExecContext& ctx, Tensor& dw, Tensor& db, const Tensor& dy,
                            const Tensor& x, bool overwrite) {
  KernelArgs args(ctx, "linear_backward_weight",
                  {{&dw, "dw"}, {&db, "db"}, {&dy, "dy"}, {&x, "x"}});
  BRAID_DISPATCH(args, linear_backward_weight, ctx, dw, db, dy, x, overwrite);
}

}  // namespace braid
