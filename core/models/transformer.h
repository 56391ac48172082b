// Transformer: a GPT-2- or Llama-family language model built from one ModelConfig, or one
// pipeline stage of it (a range of blocks). It knows nothing of parallelism.
//
// As a Module its forward is the stage's part of the network: token ids -> hidden states on the
// first stage (embedding, then blocks), hidden -> hidden on the others. The last stage adds
// the loss head: loss() runs the final norm, LM head and cross-entropy and keeps the input
// gradient on the micro-batch, so backward(undefined, mb) on the last stage starts from it.
// backward returns the gradient for the previous stage (undefined on the first). A pipeline
// executor runs loss() at the start of the last stage's backward action: the fused LM head
// writes its weight gradient there, so gradients accumulate in backward order.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "core/kernels/cross_entropy.h"
#include "core/model_config.h"
#include "core/models/block.h"

namespace braid {

// Blocks [first, last) of the model; the embedding lives with block 0 and the final norm and
// LM head with the last block. The default is the whole model.
// The LM head + cross-entropy that loss() and loss_eval() run, with lm_head_cross_entropy's
// contract (core/kernels/cross_entropy.h). Replaceable so that a pass (tensor parallelism's
// vocab-parallel cross-entropy) can change it without the model knowing; w is the head weight
// as this rank holds it. targets are the micro-batch's (B, T); x holds this rank's rows of the
// final hidden states, (B * T, C), or (B * T / tp, C) under sequence parallelism (each
// sequence's slice); losses has one entry per target and dx x's shape.
using HeadLossFn =
    std::function<void(ExecContext& ctx, Tensor& losses, Tensor& dx, Tensor& dw, const Tensor& x,
                       const Tensor& w, const Tensor& targets, float grad_scale)>;

struct BlockRange {
  int first = 0;
  int last = -1;  // -1: n_layer
};

class Transformer : public Module {
 public:
  Transformer(ExecContext& ctx, const ModelConfig& cfg, BlockRange range = {});

  const ModelConfig& config() const { return cfg_; }
  int first_block() const { return first_; }
  int last_block() const { return last_; }
  bool has_embedding() const { return has_embedding_; }
  bool has_head() const { return has_head_; }
  // Replaces the head's loss (null restores lm_head_cross_entropy). Decoding needs the default.
  void set_head_loss(HeadLossFn fn) { head_loss_ = std::move(fn); }

  // Every parameter once, in order of use (the tied LM head is the token embedding; a last
  // stage without the embedding holds a replica of it). Recollected after passes.
  const std::vector<Parameter*>& parameters() const { return params_; }
  void refresh_parameters();  // after a pass added or replaced modules
  Parameter* find_parameter(const std::string& name) const;  // null when absent
  // GPT-2's tied embedding on this stage: the token table (first stage) or the head's replica
  // of it (a last stage without the embedding); null when untied or on a middle stage. After
  // a step's backward the copies on the first and last stage must have their gradients summed
  // (pipeline layer: an all-reduce over those two stages) before clipping.
  Parameter* tied_embedding();

  // GPT-2-style seeded init: N(0, init_std), residual output projections scaled by
  // 1/sqrt(2 * n_layer), biases 0, norm weights 1. Each tensor's values depend only on
  // (seed, its name), not on construction order, stage or layout.
  void init_weights();
  // What init_weights puts into the parameter called `name`, written into `whole` (its whole,
  // unsplit shape, f32): how a tensor-parallel rank initialises only its part.
  void init_parameter(const std::string& name, Tensor& whole) const;
  // Zeroes the gradients lazily (Parameter::defer_zero_grad): the next step's first contribution
  // writes them, or they are zeroed when first handed out.
  void zero_grad(ExecContext& ctx);

  // The stage's forward / backward / incremental decode (see the file comment).
  Tensor forward(const Tensor& input, MicroBatch& mb) override;
  Tensor backward(const Tensor& dy, MicroBatch& mb) override;
  Tensor infer(const Tensor& input, InferState& st) override;
  // Last stage: final norm + LM head + cross-entropy on h (B, T, C) with targets (B, T) i32.
  // Parameter gradients accumulate grad_scale * d(sum of token losses); the input gradient
  // is kept on mb for backward. Returns the micro-batch's loss sum.
  LossSum loss(const Tensor& h, const Tensor& targets, float grad_scale, MicroBatch& mb);

  // Evaluation: the training forward's kernels (so evaluation and training losses agree bit
  // for bit on the same batch), keeping nothing. forward_eval works on every stage;
  // loss_eval on the last. sample_starts: packed samples (MicroBatch::sample_starts), each
  // with its own positions and attention, as in training.
  Tensor forward_eval(ExecContext& ctx, const Tensor& input,
                      const Tensor& sample_starts = Tensor());
  LossSum loss_eval(ExecContext& ctx, const Tensor& h, const Tensor& targets);

  // Whole model: one micro-batch's forward and backward; returns its loss sum.
  LossSum forward_backward(MicroBatch& mb, const Tensor& tokens, const Tensor& targets,
                           float grad_scale);
  LossSum forward_loss(ExecContext& ctx, const Tensor& tokens, const Tensor& targets,
                       const Tensor& sample_starts = Tensor());

  // Incremental decoding of one sequence (whole model): feeds tokens (1, Tn) at positions
  // [cache.len, cache.len + Tn), advances cache.len, returns the last position's logits (V).
  Tensor decode(ExecContext& ctx, const Tensor& tokens, KVCache& cache);
  KVCache make_cache(ExecContext& ctx, int64_t max_len) const;

 private:
  Parameter& head_weight();
  Module& block(int i) const { return child(block_slot0_ + i); }
  // Through the slots, not pointers to the built modules: a pass may have replaced them.
  Module& embedding() const { return child(0); }
  Module& final_norm() const { return child(num_slots() - 1); }
  void run_head_loss(ExecContext& ctx, Tensor& losses, Tensor& dx, Tensor& dw, const Tensor& x,
                     const Tensor& w, const Tensor& targets, float grad_scale);

  ModelConfig cfg_;
  int first_, last_;
  bool has_embedding_ = false;  // slot 0 on the first stage
  bool has_head_ = false;       // the final norm in the last slot on the last stage
  size_t block_slot0_ = 0;
  HeadLossFn head_loss_;
  std::unique_ptr<Parameter> lm_head_;  // untied head, or the tied replica on a last stage
  std::vector<Parameter*> params_;
};

}  // namespace braid
