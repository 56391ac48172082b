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
#include "optim/zero_adamw.h"

namespace braid {

class MixedPrecision {
 public:
  // Converts the parameters' weights to the compute dtype (bf16/fp16), keeping f32 masters of
  // the trainable ones; frozen ones (a LoRA base) are converted once and get no master.
  // Trainable parameters already in the compute dtype were converted by a ZeroAdamW built
  // first, which keeps their (sharded) masters: pass it to use_zero() before training.
  // params: every parameter this rank trains (all of its pipeline chunks), holding the f32
  // values training starts from (init, init_from or a resumed checkpoint).
  MixedPrecision(ExecContext& ctx, std::vector<Parameter*> params, const TrainConfig& cfg);

  // ZeRO-1 with mixed precision: `zero` (built with this run's compute dtype, before this
  // object) owns the trainable parameters' masters and moments, sharded over the DP group;
  // from here on checkpoints, loading, unscaling and the overflow test hook go through it.
  // With fp32 it only checks that `zero` is f32 too.
  void use_zero(ZeroAdamW& zero);

  bool low_precision() const { return masters_ != nullptr; }
  bool scaling() const { return scaler_.has_value(); }
  // One line for the log (dtype, conversion path, bf16 GEMM path); empty for fp32.
  std::string describe(const GemmPlan& plan) const;

  // What the optimizer updates: the masters, or the model's own parameters (fp32).
  std::vector<Parameter*> optimizer_params();
  // (name, f32 tensor) for checkpoints: the masters, or the model's values (fp32).
  std::vector<std::pair<std::string, Tensor>> checkpoint_weights() const;
  // For a checkpoint on every rank of the DP group (collective with use_zero and 16 bits:
  // the master shards are gathered): checkpoint_weights() on `lead`, nothing elsewhere.
  std::vector<std::pair<std::string, Tensor>> gather_checkpoint_weights(bool lead);

  // The factor the loss gradient is multiplied by (1 unless fp16).
  float loss_scale() const { return scaler_ ? scaler_->scale() : 1.0f; }
  // fp16: after the backward, with the step's loss and the norm of the scaled gradients.
  // Returns true when the step overflowed and must be skipped (logged through `say`);
  // otherwise unscales the gradients and returns false with *norm the unscaled norm. Throws
  // UserError after train.max_skipped_steps skips in a row.
  bool check_overflow(double loss, double* norm, int64_t step,
                      const std::function<void(const std::string&)>& say);
  // BRAID_TEST_OVERFLOW_AT_STEP=N (a test hook, bf16/fp16 runs only): after step N's
  // backward, one gradient is set to inf, as an fp16 overflow would leave it. With ZeRO-1 an
  // inf in one rank's gradient reaches only the rank that owns that element after the
  // reduce-scatter, so the hook poisons only DP rank BRAID_TEST_OVERFLOW_RANK's shard
  // (default 0): the global norm must then skip the step on every rank.
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
  ZeroAdamW* zero_ = nullptr;  // use_zero(): owns the trainable parameters' masters
  int64_t left_to_zero_ = 0;   // trainable parameters found already converted (for zero_)
  int inject_rank_ = 0;        // BRAID_TEST_OVERFLOW_RANK, ZeRO-1 only
  std::optional<LossScaler> scaler_;
  int64_t inject_step_ = -1;
};

}  // namespace braid
