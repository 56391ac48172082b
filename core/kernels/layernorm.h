// LayerNorm over the last dimension (forward and backward).
#pragma once

#include "core/context.h"

namespace braid {

// x, y: (N, C); w, b: (C); mean, rstd: (N) saved for backward.
void layernorm_forward(ExecContext& ctx, Tensor& y, Tensor& mean, Tensor& rstd, const Tensor& x,
                       const Tensor& w, const Tensor& b, float eps);
// dx (N, C) is overwritten; dw, db (C) accumulate (+=).
void layernorm_backward(ExecContext& ctx, Tensor& dx, Tensor& dw, Tensor& db, const Tensor& dy,
                        const Tensor& x, const Tensor& w, const Tensor& mean, const Tensor& rstd);

}  // namespace braid
