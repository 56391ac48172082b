// The AdamW update of one element, shared by the CPU kernel and the CUDA kernel
// (core/kernels/cpu/optimizer.cpp, core/kernels/cuda/optimizer.cu). Every product and sum is
// rounded on its own (fp.h), and division and square root are IEEE on both, so the two backends
// produce the same bits. The 8-bit AdamW (core/kernels/math/adamw8bit.h) uses the two halves,
// adamw_moments and adamw_apply, around its dequantise/requantise.
#pragma once

#include <cmath>

#include "core/kernels/math/fp.h"
#include "core/kernels/math/hd.h"

namespace braid::math {

// m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
BRAID_HD void adamw_moments(float& m, float& v, float g, float b1, float b2) {
  m = add_rn(mul_rn(b1, m), mul_rn(1.0f - b1, g));
  v = add_rn(mul_rn(b2, v), mul_rn(mul_rn(1.0f - b2, g), g));
}

// w -= step_size * m / (sqrt(v) * inv_sqrt_bc2 + eps) + decay * w
BRAID_HD void adamw_apply(float& w, float m, float v, float eps, float step_size,
                          float inv_sqrt_bc2, float decay) {
  const float denom = add_rn(mul_rn(sqrtf(v), inv_sqrt_bc2), eps);
  w = w - add_rn(mul_rn(step_size, m) / denom, mul_rn(decay, w));
}

// Both halves (the constants of core/kernels/optimizer.h's AdamWStep), g first multiplied by
// grad_scale (g * 1 is g, bit for bit, so no branch).
BRAID_HD void adamw_element(float& w, float& m, float& v, float g, float b1, float b2, float eps,
                            float step_size, float inv_sqrt_bc2, float decay, float grad_scale) {
  g = mul_rn(g, grad_scale);
  adamw_moments(m, v, g, b1, b2);
  adamw_apply(w, m, v, eps, step_size, inv_sqrt_bc2, decay);
}

}  // namespace braid::math
