// CPU dropout: one counter-based draw per element, independent of thread count (the rule is
// core/kernels/math/dropout.h, shared with the CUDA kernel).
#include "core/kernels/math/dropout.h"

#include "core/kernels/cpu/cpu_checks.h"
#include "core/kernels/cpu/dropout_cpu.h"
#include "core/kernels/cpu/lowp.h"
#include "core/profile.h"
#include "core/random.h"

namespace braid::cpu {

void dropout_apply(ExecContext& ctx, Tensor& y, const Tensor& x, float p, uint64_t seed,
                   uint64_t stream, DropoutWindow window) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Elementwise);
  check_float_args("dropout_apply", {{&x, "x"}, {&y, "y"}});
  check_shape(y, x.shape(), "dropout_apply y");
  const int64_t n = x.numel();
  const float keep_scale = 1.0f / (1.0f - p);
  const uint64_t base = hash_combine(seed, stream);
  const int64_t cols = window.full_cols > 0 ? x.dim(-1) : 1;
  // 16-bit x or y (LoRA under bf16) are widened and narrowed span by span (TileIo), f32 ones
  // used in place; y may be x.
  const TileIo io(ctx);
  parallel_spans(ctx, n, kSpan, 2, any_low_precision({&y, &x}),
                 [&](int64_t s0, int64_t len, float* buf) {
                   const float* xs = io.in(x, s0, len, buf);
                   float* ys = io.out(y, s0, buf + kSpan);
                   for (int64_t i = 0; i < len; ++i) {
                     // The element's index in the whole tensor (itself unless x is a column
                     // window of it).
                     const int64_t idx =
                         math::dropout_index(s0 + i, cols, window.full_cols, window.col_offset);
                     ys[i] = math::dropout_value(xs[i], base, idx, p, keep_scale);
                   }
                   io.store(y, s0, len, ys);
                 });
}

}  // namespace braid::cpu
