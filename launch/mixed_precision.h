// train.precision for one run: bf16/fp16 compute weights with f32 masters in the optimizer
// (optim/master_weights.h) and, for fp16, dynamic loss scaling (optim/loss_scaler.h). With
// fp32 every member is a pass-through, so the fp32 trainer path is unchanged.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/models/transformer.h"
#include "core/safetensors.h"
#include "launch/train_config.h"
#include "optim/adamw.h"
#include "optim/loss_scaler.h"
#include "optim/master_weights.h"

namespace braid {

// The compute dtype of train.precision ("fp32" -> f32, "bf16", "fp16" -> f16).
DType precision_dtype(const std::string& precision);

class MixedPrecision {
 public:
  // Converts the parameters' weights to the compute dtype (bf16/fp16), keeping f32 masters.
  // params: every parameter this rank trains (all of its pipeline chunks).
  MixedPrecision(ExecContext& ctx, std::vector<Parameter*> params, const TrainConfig& cfg);

  bool low_precision() const { return masters_ != nullptr; }
  bool scaling() const { return scaler_.has_value(); }
  // One line for the log (dtype, conversion path, bf16 GEMM path); empty for fp32.
  std::string describe(const GemmPlan& plan) const;

  // What the optimizer updates: the masters, or the model's own parameters (fp32).
  std::vector<Parameter*> optimizer_params();
  // (name, f32 tensor) for checkpoints: the masters, or the model's values (fp32).
  std::vector<std::pair<std::string, Tensor>> checkpoint_weights() const;

  // The factor the loss gradient is multiplied by (1 unless fp16).
  float loss_scale() const { return scaler_ ? scaler_->scale() : 1.0f; }
  // fp16: after the backward, with the step's loss and the norm of the scaled gradients.
  // Returns true when the step overflowed and must be skipped (logged through `say`);
  // otherwise unscales the gradients and returns false with *norm the unscaled norm. Throws
  // UserError after train.max_skipped_steps skips in a row.
  bool check_overflow(double loss, double* norm, int64_t step,
                      const std::function<void(const std::string&)>& say);
  // BRAID_TEST_OVERFLOW_AT_STEP=N (a test hook, bf16/fp16 runs only): after step N's
  // backward, one gradient is set to inf, as an fp16 overflow would leave it.
  void inject_test_overflow(int64_t step);
  // The optimizer step (on the masters, then refreshing the compute weights).
  void step(AdamW& opt, float lr);

  // Loss-scaler state for the checkpoint manifest (null for fp32/bf16), and its restore.
  nlohmann::json state_json() const;
  void restore(const nlohmann::json& state);

 private:
  ExecContext& ctx_;
  std::vector<Parameter*> params_;
  std::unique_ptr<MasterWeights> masters_;
  std::optional<LossScaler> scaler_;
  int64_t inject_step_ = -1;
};

}  // namespace braid
