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
  if (any_low_precision({&y, &x})) {  // bf16/f16 storage (LoRA under bf16): f32 arithmetic
    F32Staging s(ctx, "dropout_apply");
    Tensor y32 = s.out(y, "y");
    cpu::dropout_apply(ctx, y32, s.in(x, "x"), p, seed, stream, window);
    return s.finish();
  }
  KernelTimer timer(ctx.profiler(), KernelGroup::Elementwise);
  check_f32(y, "dropout_apply", "y");
  check_f32(x, "dropout_apply", "x");
  check_shape(y, x.shape(), "dropout_apply y");
  const int64_t n = x.numel();
  const float* xp = x.f32();
  float* yp = y.f32();  // may be x
  const float keep_scale = 1.0f / (1.0f - p);
  const uint64_t base = hash_combine(seed, stream);
  const int64_t cols = window.full_cols > 0 ? x.dim(-1) : 1;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    // The element's index in the whole tensor (itself unless x is a column window of it).
    const int64_t idx = math::dropout_index(i, cols, window.full_cols, window.col_offset);
    yp[i] = math::dropout_value(xp[i], base, idx, p, keep_scale);
  }
}

}  // namespace braid::cpu
