// Softmax cross-entropy fused with the LM head: logits are produced and consumed in row
// chunks, so the full (N, V) logits matrix is never stored.
#pragma once

#include "core/context.h"

namespace braid {

// Sum of per-token losses and how many tokens counted (targets of -1 are ignored).
struct LossSum {
  double sum = 0.0;
  int64_t count = 0;
};

// x: (N, C) final hidden states; w: (V, C) LM head weight; targets: (N) i32, -1 = ignored.
// losses: (N) f32, per-row -log softmax(x w^T)[target] (0 for ignored rows).
// When dx is defined: dx (N, C) is overwritten with grad_scale * (softmax - onehot) W and
// dw (V, C), when defined, accumulates grad_scale * (softmax - onehot)^T x (forward and
// backward in one pass, since the loss is the end of the graph; undefined dw: a frozen head, no
// weight-gradient GEMM). Ignored rows contribute nothing.
// Throws on a target outside [-1, V).
void lm_head_cross_entropy(ExecContext& ctx, Tensor& losses, Tensor& dx, Tensor& dw,
                           const Tensor& x, const Tensor& w, const Tensor& targets,
                           float grad_scale);

// The sum (in double, in row order) of losses (N) over rows whose target (N, i32) is not -1.
LossSum loss_sum(ExecContext& ctx, const Tensor& losses, const Tensor& targets);

}  // namespace braid
