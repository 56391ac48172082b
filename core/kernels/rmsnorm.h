// RMSNorm over the last dimension (forward and backward): y = x * rstd * w.
#pragma once

#include "core/context.h"

namespace braid {

// x, y: (N, C); w: (C); rstd: (N) saved for backward.
void rmsnorm_forward(ExecContext& ctx, Tensor& y, Tensor& rstd, const Tensor& x, const Tensor& w,
                     float eps);
// dx (N, C) is overwritten; dw (C) accumulates (+=).
void rmsnorm_backward(ExecContext& ctx, Tensor& dx, Tensor& dw, const Tensor& dy, const Tensor& x,
                      const Tensor& w, const Tensor& rstd);

}  // namespace braid
