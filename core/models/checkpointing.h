// Activation checkpointing as passes over the model's named slots (the model code does not
// know about it).
//
// - full: a block is wrapped in Recompute: its forward runs the block on a scratch micro-batch
//   and keeps only the block's input; its backward recomputes the block's forward on a fresh
//   micro-batch and runs the block's backward there, passing grad-ready reports and deferred
//   weight gradients through to the real micro-batch. Every n-th block is wrapped (layers 0,
//   n, 2n, ...).
// - selective: the cheap, memory-heavy outputs inside each block are not stashed but rebuilt
//   in the backward: the norms' outputs (stashed by the projections that read them) and the
//   activation function's output (stashed by the down projection). The attention core is
//   left alone: braid's attention is flash-style and keeps only q, k, v, its output (which
//   the output projection stashes anyway) and one log-sum-exp per row, so recomputing it
//   would save nothing (Korthikanti et al. 2022's selective recomputation targets the
//   softmax and dropout matrices, which braid never stores). No GEMM is recomputed.
// Both give the same gradients bit for bit as no checkpointing: the recomputation runs the
// same kernels on the same inputs (dropout masks come from the micro-batch's seed).
#pragma once

#include <memory>
#include <string>

#include "core/checkpointing_mode.h"
#include "core/models/activation_fn.h"
#include "core/models/transformer.h"

namespace braid {

// Full recomputation of `inner` (a block).
class Recompute final : public Module {
 public:
  explicit Recompute(std::unique_ptr<Module> inner);
  Tensor forward(const Tensor& x, MicroBatch& mb) override;
  Tensor backward(const Tensor& dy, MicroBatch& mb) override;
  Tensor infer(const Tensor& x, InferState& st) override;

 private:
  Module& inner() const { return child(0); }
};

// Keeps `inner` (a norm) as it is, but its output is rebuilt with inner.infer wherever a later
// layer would stash it.
class RecomputeOutput final : public Module {
 public:
  explicit RecomputeOutput(std::unique_ptr<Module> inner);
  Tensor forward(const Tensor& x, MicroBatch& mb) override;
  Tensor backward(const Tensor& dy, MicroBatch& mb) override;
  Tensor infer(const Tensor& x, InferState& st) override;

 private:
  Module& inner() const { return child(0); }
};

// The same for the MLP's activation function.
class RecomputeActivation final : public ActivationFn {
 public:
  explicit RecomputeActivation(std::unique_ptr<Module> inner);
  Tensor apply(ExecContext& ctx, const Tensor& a, const Tensor& b) override;
  Tensor forward2(const Tensor& a, const Tensor& b, MicroBatch& mb) override;
  Tensor backward2(const Tensor& dy, MicroBatch& mb, Tensor* db) override;

 private:
  ActivationFn& inner_;
};

// The pass: mode None, Full (every_n_layers-th blocks) or Selective. Call after the other
// passes (LoRA); refreshes the model's parameter list. Returns how many modules it wrapped.
int apply_checkpointing(Transformer& model, Checkpointing mode, int every_n_layers = 1);

}  // namespace braid
