// Per-element LayerNorm and RMSNorm arithmetic shared by the CPU kernels
// (core/kernels/cpu/{layernorm,rmsnorm}.cpp) and the CUDA ones: the row statistic, the output,
// and the input gradient given the row sums. The row sums themselves are reductions whose
// order each backend chooses.
#pragma once

#include <cmath>

#include "core/kernels/math/hd.h"

namespace braid::math {

// 1 / sqrt(mean_square + eps), where mean_square is the row's variance (LayerNorm) or mean of
// squares (RMSNorm); IEEE division and square root on both backends.
BRAID_HD float norm_rstd(float mean_square, float eps) { return 1.0f / sqrtf(mean_square + eps); }

// LayerNorm: y = (x - mean) rstd w + b.
BRAID_HD float layernorm_y(float x, float mean, float rstd, float w, float b) {
  return (x - mean) * rstd * w + b;
}

// LayerNorm input gradient with g = dy w, xhat = (x - mean) rstd, mg = mean_c(g) and
// mgx = mean_c(g xhat): rstd (g - mg - xhat mgx).
BRAID_HD float layernorm_dx(float dy, float w, float xhat, float rstd, float mg, float mgx) {
  return rstd * (dy * w - mg - xhat * mgx);
}

// RMSNorm: y = x rstd w.
BRAID_HD float rmsnorm_y(float x, float rstd, float w) { return x * rstd * w; }

// RMSNorm input gradient with xhat = x rstd and mgx = mean_c(dy w xhat): rstd (dy w - xhat mgx).
BRAID_HD float rmsnorm_dx(float dy, float w, float xhat, float rstd, float mgx) {
  return rstd * (dy * w - xhat * mgx);
}

}  // namespace braid::math
