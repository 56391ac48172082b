// Reorders between a batch of sequences and the rank-major blocks of a sequence-parallel
// collective (parallel/sequence_parallel.h): rank r of n holds positions [r T / n, (r + 1) T / n)
// of each of the B sequences, and a collective's buffer holds the ranks' blocks one after
// another, (n, B, T / n, ...). The model's layout is (B, T, ...) = (B, n, T / n, ...). For B = 1
// the two layouts are the same and callers skip the copy.
//
// Pure copies, so any dtype (f32, bf16, f16, i32: the targets of the vocab-parallel loss too).
#pragma once

#include "core/context.h"

namespace braid {

// blocks (n B (T / n) rows of seq's trailing size, any shape with seq's element count) = seq
// (B, T, ...) regrouped rank-major. seq is at least 2-d; T must be a multiple of n.
void seq_to_blocks(ExecContext& ctx, Tensor& blocks, const Tensor& seq, int n);
// The conjugate: seq (B, T, ...) from the rank-major blocks.
void blocks_to_seq(ExecContext& ctx, Tensor& seq, const Tensor& blocks, int n);

}  // namespace braid
