// optimizer: argument checks and device dispatch of the public kernels (core/kernels/optimizer.h).
#include "core/kernels/optimizer.h"

#include "core/kernels/cpu/cpu_kernels.h"
#include "core/kernels/cuda/cuda_kernels.h"
#include "core/kernels/dispatch.h"

namespace braid {

void adamw_update(ExecContext& ctx, Tensor& w, Tensor& m, Tensor& v, const Tensor& g,
                  const AdamWStep& s) {
  KernelArgs args(ctx, "adamw_update", {{&w, "w"}, {&m, "m"}, {&v, "v"}, {&g, "g"}});
  BRAID_DISPATCH(args, adamw_update, ctx, w, m, v, g, s);
}

}  // namespace braid
