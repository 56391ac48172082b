// Optimizer: what the trainer holds to turn one step's gradients into new parameters, the same
// interface for every layout and precision. Implementations: AdamW (optim/adamw.h: the whole
// state on every data-parallel rank), ZeroAdamW (optim/zero_adamw.h: ZeRO-1, the state sharded
// over the DP group) and MixedPrecision (optim/mixed_precision.h: bf16/fp16 compute weights
// with f32 masters and, for fp16, dynamic loss scaling, wrapped around either of the others).
//
// One step, after the backward and the data-parallel reduction (DataParallel::finish):
//   norm = grad_norm()                              collective over the groups the model spans
//   if (!skip_step(loss, &norm, step, say)) {       fp16: overflow -> skip; else unscale
//     clip(norm, max_norm); step(lr);               collective under ZeRO-1 (the all-gather)
//   }
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace braid {

class Communicator;
class ExecContext;

// (name, tensor) lists as checkpoints store them.
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// The groups a rank's model spans besides data parallelism, for the gradient norm: split
// parameters summed over tp, stages summed over pp. Null (or a group of one): not split.
struct ModelGroups {
  Communicator* tp = nullptr;
  Communicator* pp = nullptr;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;

  // ---- one step
  // The L2 norm of the step's reduced gradients over the whole model (every rank's part
  // counted once), the same double on every rank. Collective.
  virtual double grad_norm() = 0;
  // Multiplies every gradient this rank's update reads by s.
  virtual void scale_grads(float s) = 0;
  // Makes the next step() read the gradients scaled so that their norm (`norm`, from
  // grad_norm) is at most max_norm (nothing when max_norm <= 0 or the norm is smaller). The
  // factor is applied inside the update (one multiply per element, the bits of scaling the
  // gradients first): the gradient tensors themselves are not rewritten.
  virtual void clip(double norm, float max_norm) = 0;
  // One update with learning rate lr from the gradients. Collective under ZeRO-1.
  virtual void step(float lr) = 0;
  // Whether step() also rewrites each updated parameter's rounded_copy (core/parameter.h), so
  // that f32 masters need no separate rounding pass afterwards.
  virtual bool updates_rounded_copies() const { return false; }
  virtual int64_t steps_taken() const = 0;
  // The gradient tensors step() reads on this rank, in update order (the reduced shards under
  // ZeRO-1).
  virtual std::vector<Tensor> grads() const = 0;

  // ---- loss scaling (fp16; a pass-through elsewhere)
  // The factor the loss gradient is multiplied by before the backward.
  virtual float loss_scale() const { return 1.0f; }
  virtual bool scales_loss() const { return false; }
  // After grad_norm, with the step's loss and the norm of the (scaled) gradients: true when the
  // step overflowed and must be skipped (said through `say`); otherwise the gradients are
  // unscaled and *norm is their norm. `step` (1-based) names the step in messages.
  virtual bool skip_step(double loss, double* norm, int64_t step,
                         const std::function<void(const std::string&)>& say) {
    (void)loss, (void)norm, (void)step, (void)say;
    return false;
  }
  // The loss scaler's state for the checkpoint manifest (null without one), and its restore.
  virtual nlohmann::json loss_scaler_state() const { return nullptr; }
  virtual void restore_loss_scaler(const nlohmann::json& state) { (void)state; }

  // ---- checkpoints
  // Whether each data-parallel rank holds a different part of the state (ZeRO-1), so every
  // rank writes its own pieces.
  virtual bool sharded() const { return false; }
  // The weights a checkpoint saves when they are not the model's own values (f32 masters
  // beside 16-bit compute weights; frozen 16-bit values as they are, which the model file
  // widens to f32), by parameter name in model order, pipeline replicas left
  // out; nullopt when the model's values are the weights. Collective over the DP group when
  // sharded(); `writer`: this rank writes them (the others may get an empty list).
  virtual std::optional<NamedTensors> checkpoint_masters(bool writer) {
    (void)writer;
    return std::nullopt;
  }
  // The optimizer state this rank saves: "<param>.exp_avg"-style tensors, whole, or when
  // sharded() this rank's flat pieces with their records (name -> {"flat_begin",
  // "global_shape"}) in *pieces.
  virtual NamedTensors state_tensors(nlohmann::json* pieces) const = 0;
  // Restores the state (get(name) returns the whole saved tensor, this rank's part taken here)
  // and the step count.
  virtual void load_state(const std::function<Tensor(const std::string&)>& get,
                          int64_t steps_taken) = 0;

  // One line for the log about precision and sharding; empty when there is nothing to say.
  virtual std::string describe(const ExecContext& ctx) const {
    (void)ctx;
    return "";
  }
};

}  // namespace braid
