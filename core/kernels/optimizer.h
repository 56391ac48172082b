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
};

// In place over w, m, v (same shape, f32) from gradient g:
//   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
//   w -= step_size * m / (sqrt(v) * inv_sqrt_bc2 + eps) + decay * w
void adamw_update(ExecContext& ctx, Tensor& w, Tensor& m, Tensor& v, const Tensor& g,
                  const AdamWStep& s);

}  // namespace braid
