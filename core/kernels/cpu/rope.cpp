// CPU rotary position embedding (HF Llama "rotate half"), applied in place, and its inverse; the
// frequency and the pair rotation are core/kernels/math/rope.h, shared with the CUDA kernel.
#include "core/kernels/math/rope.h"

#include <cmath>
#include <vector>

#include "core/kernels/cpu/cpu_checks.h"
#include "core/kernels/cpu/cpu_kernels.h"
#include "core/kernels/cpu/lowp.h"
#include "core/kernels/rope_freq.h"
#include "core/profile.h"

namespace braid {

namespace {

// Rotates every (i, i + D/2) pair of x (B, T, H, D) by sign * (pos_offset + t) * freq_i and
// multiplies it by the rope type's attention scaling. The cos/sin table (T, D/2) is built once
// per call in double, so that the angle of a long position keeps its precision (a float
// product loses ~1e-3 rad at position 1e5), then shared by all batch rows and heads.
void rope_rotate(ExecContext& ctx, Tensor& x, int64_t pos_offset, const RopeScaling& rope,
                 float sign, const char* op) {
  cpu::check_cpu(x, op, "x");
  cpu::check_float_storage(x, op, "x");
  BRAID_CHECK(x.ndim() == 4, "{}: x must be (B, T, H, D), got {}", op, x.str());
  const int64_t B = x.dim(0), T = x.dim(1), H = x.dim(2), D = x.dim(3);
  BRAID_CHECK(D % 2 == 0, "{}: head dim D must be even, got {}", op, D);
  BRAID_CHECK(rope.theta > 0.0, "{}: theta must be positive, got {}", op, rope.theta);
  BRAID_CHECK(
      rope.type == RopeType::Default || rope.type == RopeType::Linear || rope.original_context > 0,
      "{}: rope type {} needs the original context length", op, enum_name(rope.type));
  BRAID_CHECK(pos_offset >= 0, "{}: pos_offset must be >= 0, got {}", op, pos_offset);
  const int64_t half = D / 2;
  if (x.numel() == 0) return;

  Tensor table = ctx.empty({T, 2, half}, DType::F32,
                           MemCategory::Workspace);  // per position: cos then sign * sin
  float* tab = table.f32();
  std::vector<double> freq(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) freq[static_cast<size_t>(i)] = rope_inv_freq(rope, i, D);
  const double scale = rope_attention_scaling(rope);
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < T; ++t) {
    const double pos = static_cast<double>(pos_offset + t);
    float* cs = tab + t * 2 * half;
    for (int64_t i = 0; i < half; ++i) {
      const double angle = pos * freq[static_cast<size_t>(i)];
      cs[i] = static_cast<float>(scale * std::cos(angle));
      cs[half + i] = sign * static_cast<float>(scale * std::sin(angle));
    }
  }

  // x: (B, T, H, D), rotated in place; a 16-bit head row is widened, rotated and narrowed.
  const cpu::TileIo io(ctx);
  const bool low = cpu::any_low_precision({&x});
#pragma omp parallel
  {
    const cpu::TileBuffers buf(ctx, low, 1, D);
#pragma omp for collapse(2) schedule(static)
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t t = 0; t < T; ++t) {
        const float* cosv = tab + t * 2 * half;
        const float* sinv = cosv + half;
        for (int64_t h = 0; h < H; ++h) {
          const int64_t off = ((b * T + t) * H + h) * D;
          float* x1 = io.inout(x, off, D, buf[0]);
          float* x2 = x1 + half;
#pragma omp simd
          for (int64_t i = 0; i < half; ++i)
            math::rope_rotate_pair(x1[i], x2[i], cosv[i], sinv[i], x1[i], x2[i]);
          io.store(x, off, D, x1);
        }
      }
    }
  }
}

}  // namespace

namespace cpu {

void rope_forward(ExecContext& ctx, Tensor& x, int64_t pos_offset, const RopeScaling& rope) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Elementwise);
  rope_rotate(ctx, x, pos_offset, rope, 1.0f, "rope_forward");
}

// The map is scale * rotation, so its transpose (the gradient map) is scale * the rotation by
// -angle.
void rope_backward(ExecContext& ctx, Tensor& dx, int64_t pos_offset, const RopeScaling& rope) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Elementwise);
  rope_rotate(ctx, dx, pos_offset, rope, -1.0f, "rope_backward");
}

}  // namespace cpu
}  // namespace braid
