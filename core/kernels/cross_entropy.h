// Softmax cross-entropy fused with the LM head: logits are produced and consumed in row
// chunks, so the full (N, V) logits matrix is never stored; and the steps of the
// vocab-parallel cross-entropy on one rank's block of the logits.
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

// The sum in double of losses (N) over rows whose target (N, i32) is not -1: in row order on the
// CPU; on a GPU in a fixed order of its own (the same bits every run, not the CPU's last bits).
LossSum loss_sum(ExecContext& ctx, const Tensor& losses, const Tensor& targets);

// Rows per chunk of the fused LM head for n rows and a vocabulary (or a rank's block of it) of
// `vocab` rows on this context's device: the (rows, vocab) f32 logits scratch stays bounded
// (CPU: 128 MiB, 64 to 512 rows; GPU: 256 MiB), at least one row, at most n.
int64_t lm_head_chunk_rows(ExecContext& ctx, int64_t n, int64_t vocab);
// Whether the fused LM head rounds each chunk's logit gradient to the operands' 16-bit dtype for
// its two backward GEMMs, for x and w of these dtypes (the same 16-bit dtype, else never): on a
// GPU always (tensor cores); on the CPU for bf16 where the bf16 GEMM is native (elsewhere the
// head runs in f32). The vocab-parallel cross-entropy follows the same rule.
bool lm_head_rounds_grad(ExecContext& ctx, DType x, DType w);
// Throws, naming the first, when a target (N, i32) is outside [-1, vocab); `op` names the
// caller. On a GPU one wait for the stream.
void check_loss_targets(ExecContext& ctx, const Tensor& targets, int64_t vocab, const char* op);

// The vocab-parallel cross-entropy (parallel/tensor_parallel.h) in steps, with the collectives
// over the tensor-parallel ranks between them. Each rank holds an (N, rows) f32 block of the
// logits whose columns are rows [row_begin, row_begin + rows) of the padded vocabulary; those
// at or past `vocab` are padding and count nowhere. targets: (N) i32 in the block's row order,
// -1 = ignored. Rows are split over OpenMP threads and each row's arithmetic is one thread's,
// so the results do not depend on the thread count.
struct VocabSlice {
  int64_t row_begin = 0;  // the block's first vocabulary row
  int64_t vocab = 0;      // the real (unpadded) vocabulary size
  // The caller has checked every target (check_loss_targets): vocab_slice_partials skips its
  // own check (on a GPU a wait for the stream).
  bool targets_checked = false;
  // How many of the block's `rows` columns are real vocabulary rows.
  int64_t real(int64_t rows) const;
};

// Step 1, then all-reduce Max of row_max: per row, the max of the block's real columns
// (-inf when it has none) into row_max (N), and into target_logit (N) the target's logit where
// this block holds it, 0 elsewhere (an all-reduce Sum then gives every rank the logit).
// Throws on a target outside [-1, vocab), before writing anything (unless targets_checked).
void vocab_slice_partials(ExecContext& ctx, Tensor& row_max, Tensor& target_logit,
                          const Tensor& logits, const Tensor& targets, const VocabSlice& slice);
// Step 2, then all-reduce Sum of sum_exp (and target_logit): the block's real columns become
// exp(logit - row_max) in place, sum_exp (N) their row sums.
void vocab_slice_exp(ExecContext& ctx, Tensor& logits, Tensor& sum_exp, const Tensor& row_max,
                     const VocabSlice& slice);
// Step 3: losses (N) = log(sum_exp) + row_max - target_logit, 0 for ignored rows.
void vocab_slice_losses(ExecContext& ctx, Tensor& losses, const Tensor& sum_exp,
                        const Tensor& row_max, const Tensor& target_logit, const Tensor& targets);
// The backward, on step 2's exp block: logits becomes d loss / d logit = grad_scale (softmax -
// onehot(target)) in place, 0 in padding columns and ignored rows.
void vocab_slice_grad(ExecContext& ctx, Tensor& logits, const Tensor& sum_exp,
                      const Tensor& targets, const VocabSlice& slice, float grad_scale);

}  // namespace braid
