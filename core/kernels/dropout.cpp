// dropout: argument checks and device dispatch (core/kernels/dropout.h).
#include "core/kernels/dropout.h"

#include "core/kernels/cpu/dropout_cpu.h"
#include "core/kernels/cuda/cuda_kernels.h"
#include "core/kernels/dispatch.h"

namespace braid {

void dropout_apply(ExecContext& ctx, Tensor& y, const Tensor& x, float p, uint64_t seed,
                   uint64_t stream, DropoutWindow window) {
  KernelArgs args(ctx, "dropout_apply", {{&y, "y"}, {&x, "x"}});
  BRAID_CHECK(p >= 0.0f && p < 1.0f, "dropout_apply: p is {}; expected 0 <= p < 1", p);
  BRAID_CHECK(window.full_cols == 0 || (x.ndim() >= 1 && window.col_offset >= 0 &&
                                        window.col_offset + x.dim(-1) <= window.full_cols),
              "dropout_apply: columns [{}, {}) of {} do not fit rows {} wide", window.col_offset,
              window.col_offset + (x.ndim() >= 1 ? x.dim(-1) : 0), x.str(), window.full_cols);
  BRAID_DISPATCH(args, dropout_apply, ctx, y, x, p, seed, stream, window);
}

}  // namespace braid
