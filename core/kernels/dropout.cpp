// dropout: argument checks and device dispatch (core/kernels/dropout.h).
#include "core/kernels/dropout.h"

#include "core/kernels/cpu/dropout_cpu.h"
#include "core/kernels/dispatch.h"

namespace braid {

void dropout_apply(ExecContext& ctx, Tensor& y, const Tensor& x, float p, uint64_t seed,
                   uint64_t stream) {
  KernelArgs args(ctx, "dropout_apply", {{&y, "y"}, {&x, "x"}});
  args.require_cpu();
  BRAID_CHECK(p >= 0.0f && p < 1.0f, "dropout_apply: p is {}; expected 0 <= p < 1", p);
  cpu::dropout_apply(ctx, y, x, p, seed, stream);
}

}  // namespace braid
