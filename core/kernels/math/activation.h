// Per-element GELU (tanh form) and SwiGLU, forward and backward, shared by the CPU kernels
// (core/kernels/cpu/activation.cpp, inside their `omp simd` loops) and the CUDA ones.
#pragma once

#include "core/kernels/math/fast_exp.h"
#include "core/kernels/math/hd.h"

namespace braid::math {

constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluCubic = 0.044715f;

// 0.5 v (1 + tanh(u)) with u = sqrt(2/pi) (v + 0.044715 v^3); 0.5 (1 + tanh(u)) ==
// sigmoid(2u), which needs one exp and no tanh.
BRAID_HD float gelu(float v) {
  const float u = kGeluScale * (v + kGeluCubic * v * v * v);
  return v * sigmoid_f32(2.0f * u);
}

// d/dv [v s(v)] with s = sigmoid(2u): s + v * 2 s (1 - s) * du/dv.
BRAID_HD float gelu_derivative(float v) {
  const float u = kGeluScale * (v + kGeluCubic * v * v * v);
  const float du = kGeluScale * (1.0f + 3.0f * kGeluCubic * v * v);
  const float s = sigmoid_f32(2.0f * u);
  return s + 2.0f * v * s * (1.0f - s) * du;
}

BRAID_HD float gelu_grad(float dy, float v) { return dy * gelu_derivative(v); }

// gelu(v) and gelu_derivative(v) from one exp: the same operations as the two functions, so
// the same bits.
BRAID_HD void gelu_with_derivative(float v, float& y, float& d) {
  const float u = kGeluScale * (v + kGeluCubic * v * v * v);
  const float du = kGeluScale * (1.0f + 3.0f * kGeluCubic * v * v);
  const float s = sigmoid_f32(2.0f * u);
  y = v * s;
  d = s + 2.0f * v * s * (1.0f - s) * du;
}

// silu(g) * u.
BRAID_HD float swiglu(float g, float u) { return g * sigmoid_f32(g) * u; }

// With s = sigmoid(g), silu'(g) = s + g s (1 - s): dgate = d u silu'(g), dup = d silu(g).
BRAID_HD void swiglu_grad(float d, float g, float u, float& dgate, float& dup) {
  const float s = sigmoid_f32(g);
  dgate = d * u * s * (1.0f + g * (1.0f - s));
  dup = d * g * s;
}

}  // namespace braid::math
