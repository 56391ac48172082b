// Per-row and per-element softmax cross-entropy arithmetic shared by the CPU and CUDA kernels
// (core/kernels/cpu/vocab_slice_cross_entropy.cpp, core/kernels/cuda/cross_entropy.cu).
#pragma once

#include <cmath>

#include "core/kernels/math/fp.h"
#include "core/kernels/math/hd.h"

namespace braid::math {

// -log softmax(logits)[target] from the row's statistics: sum_exp = sum of exp(logit - row_max).
BRAID_HD float softmax_xent_loss(float sum_exp, float row_max, float target_logit) {
  return logf(sum_exp) + row_max - target_logit;
}

// d loss / d logit of one element: e = exp(logit - row_max), inv = grad_scale / sum_exp.
BRAID_HD float softmax_xent_grad(float e, float inv, bool is_target, float grad_scale) {
  const float g = mul_rn(e, inv);
  return is_target ? g - grad_scale : g;
}

}  // namespace braid::math
