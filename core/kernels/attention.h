// Causal scaled-dot-product attention with grouped-query heads (forward and backward).
//
// Flash-style: the T x T probabilities are never kept for the whole batch; forward saves only
// the log-sum-exp per query row and backward recomputes the probabilities block by block.
#pragma once

#include "core/context.h"

namespace braid {

// q: (B, Tq, Hq, D); k, v: (B, Tk, Hkv, D) with Hq % Hkv == 0 (query head h uses kv head
// h / (Hq / Hkv)); Tq <= Tk. Query row i sits at absolute position Tk - Tq + i and attends to
// keys 0 ..= Tk - Tq + i (so Tq == Tk is ordinary causal training, Tq == 1 is a decode step
// against a KV cache). Scale 1/sqrt(D). A window > 0 (sliding-window attention, Mistral's)
// also hides keys more than window - 1 positions before the query: row i sees keys
// max(0, p - window + 1) ..= p, p its absolute position; 0 hides none.
// Document masking (packed sequences): sample_starts, when defined, is (B, Tk) i32 on the host,
// the position where the sample holding each position begins (s[p] == p or s[p] == s[p - 1]);
// the query at absolute position p also hides the keys before s[p], so no attention crosses a
// sample boundary. Key blocks that no query of a block can see are skipped. CPU only: a
// defined sample_starts on another device is an error.
// out: (B, Tq, Hq, D); lse: (B, Hq, Tq) f32 log-sum-exp of the scaled scores (for backward).
void attention_forward(ExecContext& ctx, Tensor& out, Tensor& lse, const Tensor& q, const Tensor& k,
                       const Tensor& v, int64_t window = 0, const Tensor& sample_starts = Tensor());
// dq (B, Tq, Hq, D), dk, dv (B, Tk, Hkv, D): overwritten.
void attention_backward(ExecContext& ctx, Tensor& dq, Tensor& dk, Tensor& dv, const Tensor& dout,
                        const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                        const Tensor& lse, int64_t window = 0,
                        const Tensor& sample_starts = Tensor());

// The same on GPT-2's fused projection, without splitting it: qkv (B, T, 3 * heads * D) holds
// each position's q, k and v heads side by side (heads query and heads kv heads); out
// (B, T, heads, D) and lse as above. The results are attention_forward's on the split q, k, v,
// bit for bit. Other devices split and call attention_forward.
void attention_forward_packed(ExecContext& ctx, Tensor& out, Tensor& lse, const Tensor& qkv,
                              int64_t heads, int64_t window = 0,
                              const Tensor& sample_starts = Tensor());
// dqkv (B, T, 3 * heads * D), overwritten: dq, dk and dv side by side as in qkv.
void attention_backward_packed(ExecContext& ctx, Tensor& dqkv, const Tensor& dout,
                               const Tensor& qkv, const Tensor& out, const Tensor& lse,
                               int64_t heads, int64_t window = 0,
                               const Tensor& sample_starts = Tensor());

}  // namespace braid
