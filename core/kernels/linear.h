// Linear layer y = x W^T + b (forward; backward split into input- and weight-gradient).
#pragma once

#include "core/context.h"

namespace braid {

// x: (N, IN); w: (OUT, IN) (PyTorch nn.Linear layout); b: (OUT) or undefined; y: (N, OUT).
// accumulate: y += x W^T instead (no bias), summed in f32 and rounded once (a LoRA adapter's
// update onto its base layer's output).
void linear_forward(ExecContext& ctx, Tensor& y, const Tensor& x, const Tensor& w, const Tensor& b,
                    bool accumulate = false);
// dx (N, IN) = dy W, overwritten (accumulate=false) or added (accumulate=true).
void linear_backward_input(ExecContext& ctx, Tensor& dx, const Tensor& dy, const Tensor& w,
                           bool accumulate = false);
// dw (OUT, IN) += dy^T x; db (OUT) += column sums of dy (skipped when db is undefined);
// overwrite: = instead of += (dw's and db's old contents are not read: a step's first
// contribution to a gradient whose zeroing was deferred, Parameter::grad_for_overwrite).
// Separate so that pipeline schedules can defer it.
void linear_backward_weight(ExecContext& ctx, Tensor& dw, Tensor& db, const Tensor& dy,
                            const Tensor& x, bool overwrite = false);

}  // namespace braid
