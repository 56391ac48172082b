// Token + learned position embedding (forward and backward).
#pragma once

#include "core/context.h"

namespace braid {

// out: (B, T, C) = wte[tokens[b, t]] + (wpe defined ? wpe[pos_offset + t] : 0)
// tokens: (B, T) i32; wte: (V, C); wpe: (P, C) or undefined. Throws on a token id outside
// [0, V) or a position outside [0, P).
void embedding_forward(ExecContext& ctx, Tensor& out, const Tensor& tokens, const Tensor& wte,
                       const Tensor& wpe, int64_t pos_offset = 0);
// dwte += scatter of dout rows by token id; dwpe (if defined) += sum over batch of dout.
// Deterministic (no atomics; the result does not depend on the thread count).
void embedding_backward(ExecContext& ctx, Tensor& dwte, Tensor& dwpe, const Tensor& dout,
                        const Tensor& tokens, int64_t pos_offset = 0);

}  // namespace braid
