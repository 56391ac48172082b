// Tensor parallelism as a pass over a model built for one rank (the model code stays
// parallelism-free): SelfAttention, MLP and the token embedding are replaced by path with their
// tensor-parallel versions (parallel/tp_layers.h), every split Parameter gets its ShardSpec and
// keeps only this rank's shard, and the LM head's loss becomes a vocab-parallel cross-entropy
// that never gathers the whole logits.
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
};

// vocab rounded up to a multiple of tp * align.
int64_t padded_vocab(int64_t vocab, int tp, int align);

// Throws braid::UserError naming the model key, its value and tp when a size does not split:
// n_head, kv heads (n_kv_head), the MLP hidden size (ffn_hidden) or n_embd; also tp < 1 or
// vocab_align < 1.
void check_tensor_parallel(const ModelConfig& cfg, int tp, const TensorParallelOptions& o = {});

// Applies the pass to `model` (a whole model or a pipeline stage) whose parameters hold their
// full values (after init_weights() or loading): each rank keeps its shard of the full tensor,
// so a tensor-parallel model starts exactly where the single-rank one does. Returns the number
// of modules replaced. Collective in the sense that every member of tp must apply it.
int apply_tensor_parallel(ExecContext& ctx, Transformer& model, Communicator& tp,
                          const TensorParallelOptions& o = {});

// After a step's backward: every trainable parameter whose part several ranks hold (kv heads
// replicated when tp > n_kv_head, and LoRA B on them) gets the sum of its holders' partial
// gradients. Collective over tp; a no-op for a layout without replicated parts.
void sum_replicated_parts(ExecContext& ctx, const std::vector<Parameter*>& params,
                          Communicator& tp);

// LoRA after the tensor-parallel pass (lora.h: A and B follow the base's split): installs the
// group sums on every LoraLinear of `model` whose base is split, the partial t = A_r x_r of a
// row-parallel base in the forward, the partial dt = s dy_r B_r of a column-parallel base in
// the backward (sequence parallelism: a row-parallel base's t reduce-scattered to this rank's
// slice, dt gathered back, B's partial gradients summed). Returns how many it set up.
int apply_tensor_parallel_lora(Transformer& model, Communicator& tp,
                               bool sequence_parallel = false);

// The vocab-parallel cross-entropy of a head weight holding rows [row_begin, row_begin + rows)
// of the padded vocabulary (rows >= vocab are padding): a HeadLossFn for Transformer.
// sequence_parallel: x is this rank's slice of each sequence (gathered for the logits) and dx
// gets the slice of the input gradient.
HeadLossFn vocab_parallel_cross_entropy(Communicator& tp, int64_t vocab, int64_t row_begin,
                                        bool sequence_parallel = false);

// The L2 norm of the gradients over the model-parallel groups: sharded parameters summed over
// tp, replicated ones counted once, pipeline replicas skipped, stages summed over pp (either
// group may be null).
double model_parallel_grad_norm(ExecContext& ctx, const std::vector<Parameter*>& params,
                                Communicator* tp, Communicator* pp);

}  // namespace braid
