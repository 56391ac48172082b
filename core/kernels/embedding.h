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

// A table holding rows [row_begin, row_begin + R) of the vocabulary (tensor parallelism):
// out (B, T, C) f32 = (the token's row when this table holds it, else 0) + (wpe defined ?
// wpe[pos_offset + t] : 0), a partial sum that adding every holder's completes. wte: (R, C);
// tokens outside [0, vocab) throw.
void embedding_rows_forward(ExecContext& ctx, Tensor& out, const Tensor& tokens, const Tensor& wte,
                            const Tensor& wpe, int64_t row_begin, int64_t vocab,
                            int64_t pos_offset = 0);
// dwte (R, C) f32 += the dout rows of the tokens this table holds; dwpe (if defined) += the
// sum over the batch of dout. Every gradient element sums its positions in order, whatever
// the thread count. Either gradient may be undefined (frozen).
void embedding_rows_backward(ExecContext& ctx, Tensor& dwte, Tensor& dwpe, const Tensor& dout,
                             const Tensor& tokens, int64_t row_begin);

}  // namespace braid
