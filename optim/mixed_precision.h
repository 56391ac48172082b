// MixedPrecision: an Optimizer wrapped around another for bf16/fp16 training. The model computes
// with 16-bit weights; the inner optimizer updates f32 masters (optim/master_weights.h), which
// are rounded back into the weights after each step; with fp16 the loss is scaled
// (optim/loss_scaler.h), overflowing steps are skipped and the rest unscaled before clipping.
//
// Two shapes, both built by the caller in this order:
//   plain:  MixedPrecision converts every parameter and keeps f32 masters of the trainable
//           ones; make_inner builds an optimizer (AdamW) over those masters.
//   ZeRO-1: a ZeroAdamW built first has converted the bucketed (trainable) parameters and keeps
//           f32 masters of its shard only; MixedPrecision converts what is left (frozen ones, a
//           LoRA base) and make_inner returns that ZeroAdamW.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/parameter.h"
#include "optim/loss_scaler.h"
#include "optim/master_weights.h"
#include "optim/optimizer.h"

namespace braid {

class MixedPrecision final : public Optimizer {
 public:
  // Builds the optimizer of the trainable parameters, given the f32 masters it is to update
  // (empty when a ZeroAdamW built first keeps them itself).
  using MakeInner = std::function<std::unique_ptr<Optimizer>(std::vector<Parameter*> masters)>;

  // params: every parameter this rank trains (all of its pipeline chunks, in model order),
  // holding the f32 values training starts from (init, init_from or a resumed checkpoint), or
  // already in `compute` where a sharded inner optimizer converted them. compute: bf16 or f16;
  // f16 scales the loss with `scaling`.
  MixedPrecision(ExecContext& ctx, std::vector<Parameter*> params, DType compute,
                 const LossScaleConfig& scaling, const MakeInner& make_inner);

  DType compute_dtype() const { return masters_->compute_dtype(); }
  Optimizer& inner() const { return *inner_; }

  double grad_norm() override { return inner_->grad_norm(); }
  void scale_grads(float s) override { inner_->scale_grads(s); }
  void clip(double norm, float max_norm) override { inner_->clip(norm, max_norm); }
  // The inner step on the masters, then the 16-bit weights rounded from them.
  void step(float lr) override;
  int64_t steps_taken() const override { return inner_->steps_taken(); }
  std::vector<Tensor> grads() const override { return inner_->grads(); }

  float loss_scale() const override { return scaler_ ? scaler_->scale() : 1.0f; }
  bool scales_loss() const override { return scaler_.has_value(); }
  // fp16: an inf/NaN loss or norm skips the step (the scale backs off); otherwise the
  // gradients are unscaled by the step's scale. Throws UserError after
  // train.max_skipped_steps skips in a row. bf16: never skips.
  bool skip_step(double loss, double* norm, int64_t step,
                 const std::function<void(const std::string&)>& say) override;
  nlohmann::json loss_scaler_state() const override;
  void restore_loss_scaler(const nlohmann::json& state) override;

  bool sharded() const override { return inner_->sharded(); }
  // The f32 masters (trainable) and the widened 16-bit values (frozen: exact), in model order;
  // with a sharded inner optimizer its masters are gathered first (collective).
  std::optional<NamedTensors> checkpoint_masters(bool writer) override;
  NamedTensors state_tensors(nlohmann::json* pieces) const override {
    return inner_->state_tensors(pieces);
  }
  void load_state(const std::function<Tensor(const std::string&)>& get,
                  int64_t steps_taken) override {
    inner_->load_state(get, steps_taken);
  }
  // Dtype, conversion path, bf16 GEMM path, the inner optimizer's line, the loss scale.
  std::string describe(const ExecContext& ctx) const override;

 private:
  ExecContext& ctx_;
  std::vector<Parameter*> params_;
  std::unique_ptr<MasterWeights> masters_;  // of what this object converted
  std::unique_ptr<Optimizer> inner_;
  std::optional<LossScaler> scaler_;
};

}  // namespace braid
