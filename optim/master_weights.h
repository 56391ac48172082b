// Mixed precision: the model computes with bf16/f16 weights while the optimizer updates f32
// master copies; the low-precision weights are refreshed from the masters after each step.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/context.h"
#include "core/parameter.h"

namespace braid {

class Optimizer;

class MasterWeights {
 public:
  // Replaces every parameter's f32 value by a `compute` (bf16 or f16) copy
  // (MemCategory::Weights). A trainable parameter keeps its f32 value as a master
  // (MemCategory::MasterWeights); a frozen one (a LoRA base) is converted once and keeps no
  // master: it never changes, so a master would cost 4 bytes per parameter for nothing; a
  // frozen one already in `compute` (a LoRA base read in 16 bits) is taken as it is.
  // Gradients stay f32 (Parameter::grad) and are shared with the masters.
  MasterWeights(ExecContext& ctx, const std::vector<Parameter*>& params, DType compute);
  MasterWeights(const MasterWeights&) = delete;
  MasterWeights& operator=(const MasterWeights&) = delete;

  DType compute_dtype() const { return compute_; }
  // The masters of the trainable parameters as parameters (same names, value = f32 master,
  // grad = the model parameter's gradient): what the optimizer updates.
  std::vector<Parameter*> params();
  // (name, tensor) of every non-replica parameter in model order, for checkpoints: the f32
  // master of a trainable one, the 16-bit compute value of a frozen one (the checkpoint writer
  // widens it exactly to f32 on the host: CheckpointFile::widen_16bit).
  std::vector<std::pair<std::string, Tensor>> named_masters() const;
  // Loads f32 weights get(name) returns: into the masters (then refresh()), and into the
  // compute values of the frozen parameters (rounded once).
  void load(const std::function<Tensor(const std::string&)>& get);
  // One optimizer step on the masters, leaving the compute values rounded from the new masters:
  // written by the update itself where the optimizer does that (each master's rounded_copy is
  // its model parameter's value), else by refresh() after it. Rebinds the gradients first, so
  // a gradient rebound on the model (a data-parallel bucket) is the one the step reads.
  void step(Optimizer& opt, float lr);
  // Writes every master into its model parameter's low-precision value (round to nearest
  // even); after a step and after loading masters from a checkpoint.
  void refresh();

 private:
  void bind_grads();
  ExecContext& ctx_;
  DType compute_;
  std::vector<Parameter*> model_;
  std::vector<std::unique_ptr<Parameter>> masters_;  // same order as model_; null when frozen
};

}  // namespace braid
