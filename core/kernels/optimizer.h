// Per-parameter optimizer updates, as kernels so that the optimizer never loops over host
// memory itself (and a GPU backend can run them on the device).
#pragma once

#include "core/context.h"

namespace braid {

// One AdamW step's constants (optim/adamw.cpp computes them once per step).
struct AdamWStep {
  float beta1, beta2, eps;
  float step_size;     // lr / (1 - beta1^t)
  float inv_sqrt_bc2;  // 1 / sqrt(1 - beta2^t)
  float decay;         // lr * weight_decay, 0 for parameters that do not decay
  // Multiplies g (one f32 multiply) before the update: a clip factor applied inside the update
  // instead of a pass that rewrites the gradients (1: g as it is, bit for bit).
  float grad_scale = 1.0f;
};

// In place over w, m, v (same shape, f32) from gradient g (times s.grad_scale):
//   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
//   w -= step_size * m / (sqrt(v) * inv_sqrt_bc2 + eps) + decay * w
// rounded (optional; bf16 or f16 with w's number of elements): also receives the new w rounded
// to its dtype, the bits cast(rounded, w) would give, in the same pass over w (the 16-bit compute
// weights of f32 masters, without a second read of the masters).
void adamw_update(ExecContext& ctx, Tensor& w, Tensor& m, Tensor& v, const Tensor& g,
                  const AdamWStep& s, Tensor* rounded = nullptr);

// 8-bit AdamW (core/kernels/math/adamw8bit.h) over w and g (same shape, f32): each moment is
// stored as codes (w's numel, u8) and absmax (ceil(numel / 2048), f32), m with the signed and v
// with the unsigned dynamic map. Each block of 2048 elements is dequantised, updated as
// adamw_update does, and requantised against its new absmax; w moves by the unrounded moments.
void adamw8bit_update(ExecContext& ctx, Tensor& w, Tensor& m_codes, Tensor& m_absmax,
                      Tensor& v_codes, Tensor& v_absmax, const Tensor& g, const AdamWStep& s);
// The number of absmax blocks of an 8-bit moment of n elements.
int64_t adamw8bit_blocks(int64_t n);

}  // namespace braid
