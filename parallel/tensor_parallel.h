// Tensor parallelism as a placement of a model built for one rank: the same core modules run on
// every layout. The pass keeps this rank's shard of every split Parameter (with its ShardSpec),
// puts the collectives into the layers' region slots (parallel/tp_regions.h: SelfAttention's
// and MLP's input region, the row-parallel projections' and the embedding's output region,
// LoRA's regions), and makes the LM head's loss a vocab-parallel cross-entropy that never
// gathers the whole logits. The layers take their local sizes (heads, MLP columns, vocabulary
// rows) from their sharded weights. Run it after the other model passes (LoRA, activation
// checkpointing): they see the same single-rank model on every layout, and the placement
// reaches into their wrappers.
//
// Splits: attention by heads (q heads and kv heads both divisible by tp; GPT-2's fused c_attn
// by head within each of its q, k, v blocks), the MLP on its hidden dimension, the token table
// and LM head by vocabulary rows. The vocabulary is padded with zero rows to a multiple of
// tp * vocab_align; padded logits are masked out of the loss, so padding never changes it.
// Norms, biases after a row-parallel sum and GPT-2's position table are replicated: their
// inputs and output gradients are the same on every rank, so their gradients are too.
//
// Sequence parallelism (TensorParallelOptions::sequence_parallel): norms and residuals run on
// each rank's slice of the sequences; the norms' partial gradients are summed like replicated
// parts (below).
//
// Grouped-query attention with tp > kv_heads: each kv head is replicated over tp / kv_heads
// ranks (ShardSpec::replicas); the holders' partial gradients of a replicated part are summed
// after the step's backward (sum_replicated_parts).
#pragma once

#include <vector>

#include "core/models/transformer.h"
#include "parallel/communicator.h"

namespace braid {

struct TensorParallelOptions {
  int vocab_align = 1;  // the padded vocabulary is a multiple of tp * vocab_align
  // Sequence parallelism (parallel/sequence_parallel.h) between the parallel regions; the
  // sequence length must be a multiple of tp.
  bool sequence_parallel = false;
  // Rows per chunk of the vocab-parallel cross-entropy (0: as the one-rank LM head chunks).
  int64_t head_chunk_rows = 0;
};

// vocab rounded up to a multiple of tp * align.
int64_t padded_vocab(int64_t vocab, int tp, int align);

// Throws braid::UserError naming the model key, its value and tp when a size does not split:
// n_head, kv heads (n_kv_head), the MLP hidden size (ffn_hidden) or n_embd; also tp < 1 or
// vocab_align < 1.
void check_tensor_parallel(const ModelConfig& cfg, int tp, const TensorParallelOptions& o = {});

// Applies the pass to `model` (a whole model or a pipeline stage) whose parameters hold their
// full values (after init_weights() or loading, and after the LoRA and checkpointing passes):
// each rank keeps its shard of the full tensor, so a tensor-parallel model starts exactly where
// the single-rank one does. Returns the number of modules placed (projections split, regions
// inserted); 0 on one rank. Every member of tp must apply it.
int apply_tensor_parallel(ExecContext& ctx, Transformer& model, Communicator& tp,
                          const TensorParallelOptions& o = {});

// After a step's backward: every trainable parameter whose part several ranks hold (kv heads
// replicated when tp > n_kv_head, and LoRA B on them) gets the sum of its holders' partial
// gradients. Collective over tp; a no-op for a layout without replicated parts.
void sum_replicated_parts(ExecContext& ctx, const std::vector<Parameter*>& params,
                          Communicator& tp);

// The vocab-parallel cross-entropy of a head weight holding rows [row_begin, row_begin + rows)
// of the padded vocabulary (rows >= vocab are padding): a HeadLossFn for Transformer.
// sequence_parallel: x is this rank's slice of each sequence (gathered for the logits) and dx
// gets the slice of the input gradient. Rows go through in chunks of chunk_rows (0: the one-rank
// head's rule, lm_head_chunk_rows), so the rank's (rows, vocab / tp) logits never exist whole;
// two small all-reduces per chunk complete each row's max and sum over the ranks.
HeadLossFn vocab_parallel_cross_entropy(Communicator& tp, int64_t vocab, int64_t row_begin,
                                        bool sequence_parallel = false, int64_t chunk_rows = 0);

// The L2 norm of the gradients over the model-parallel groups: sharded parameters summed over
// tp, replicated ones counted once, pipeline replicas skipped, stages summed over pp (either
// group may be null).
double model_parallel_grad_norm(ExecContext& ctx, const std::vector<Parameter*>& params,
                                Communicator* tp, Communicator* pp);

}  // namespace braid
