// AdamW with decoupled weight decay over a model's trainable parameters: an Optimizer
// (optim/optimizer.h) whose whole state lives on every data-parallel rank. With optim.name
// adamw8bit the moments of every parameter of at least kAdam8bitMinNumel elements are kept in
// 8 bits (block-wise dynamic quantisation, core/kernels/optimizer.h's adamw8bit_update): 2 bytes
// per parameter plus 8 bytes per 2048 instead of 8; smaller ones (norms, biases) keep f32
// moments, as bitsandbytes does.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/context.h"
#include "core/kernels/math/adamw8bit.h"
#include "core/kernels/optimizer.h"
#include "core/parameter.h"
#include "optim/optim_config.h"
#include "optim/optimizer.h"

namespace braid {

class AdamW : public Optimizer {
 public:
  // Moments are allocated on ctx (MemCategory::OptimizerState); step() runs its kernels there.
  // groups: what the parameters are split over besides data parallelism (for grad_norm).
  AdamW(ExecContext& ctx, std::vector<Parameter*> params, const OptimConfig& cfg,
        const ModelGroups& groups = {});

  // model_parallel_grad_norm over the trainable parameters (parallel/tensor_parallel.h).
  double grad_norm() override;
  void scale_grads(float s) override;
  // The clip factor (clip_factor) is kept and applied inside the next step's update.
  void clip(double norm, float max_norm) override;
  std::vector<Tensor> grads() const override;

  // One update with learning rate lr from each parameter's .grad:
  //   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
  //   p -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps)  +  lr * wd * p   (decaying only)
  void step(float lr) override;
  bool updates_rounded_copies() const override { return true; }
  int64_t steps_taken() const override { return t_; }
  // Whether weight decay applies: not for 1-D tensors, nor names matching cfg.no_decay.
  bool decays(const Parameter& p) const;

  // Checkpoint state: "<param>.exp_avg" and "<param>.exp_avg_sq" for each trainable parameter
  // with f32 moments; for an 8-bit one the moments exactly as held, "<param>.exp_avg_codes"
  // (u8, the parameter's shape) and "<param>.exp_avg_absmax" (f32, one per block of 2048), the
  // same for exp_avg_sq (`_codes`, `_absmax`).
  std::vector<std::pair<std::string, Tensor>> state_tensors() const;
  // The same for a checkpoint (whole tensors: *pieces is left alone).
  NamedTensors state_tensors(nlohmann::json* pieces) const override;
  // Restores moments and the step count; get(name) returns the saved tensor (throws if absent).
  void load_state(const std::function<Tensor(const std::string&)>& get,
                  int64_t steps_taken) override;

 private:
  struct Slot {
    Parameter* p;
    Tensor m, v;  // (same shape as p), MemCategory::OptimizerState; f32 moments only
    // 8-bit moments: codes (same shape as p, u8) and absmax (ceil(numel / 2048), f32).
    Tensor m_codes, m_absmax, v_codes, v_absmax;
    bool decay;
    bool eight_bit() const { return m_codes.defined(); }
  };
  ExecContext& ctx_;
  std::vector<Slot> slots_;
  std::vector<Parameter*> trainable_;  // the slots' parameters
  ModelGroups groups_;
  OptimConfig cfg_;
  int64_t t_ = 0;
  float grad_scale_ = 1.0f;  // clip's factor, applied by the next step
};

// Parameters smaller than this keep f32 moments under adamw8bit (bitsandbytes' min_8bit_size).
constexpr int64_t kAdam8bitMinNumel = 4096;
// Elements per quantisation block of the 8-bit moments, counted from a parameter's first element.
constexpr int64_t kAdam8bitBlock = math::kAdam8bitBlock;

// Whether AdamW decays `p`: not 1-D tensors, nor names containing one of cfg.no_decay.
bool adamw_decays(const Parameter& p, const OptimConfig& cfg);

// The constants of AdamW's step number t (1-based) at learning rate lr, shared by AdamW and
// ZeroAdamW: step_size = lr / (1 - beta1^t), inv_sqrt_bc2 = 1 / sqrt(1 - beta2^t) (the bias
// corrections, powers in double), decay = 0 (the caller sets lr * weight_decay per parameter).
AdamWStep adamw_step_constants(const OptimConfig& cfg, int64_t t, float lr);

// Learning rate at optimizer step `step` (0-based): linear warmup to cfg.lr over
// warmup_steps, then cosine/linear decay to min_lr at decay_steps (or total_steps), then flat.
float lr_at(const OptimConfig& cfg, int64_t step, int64_t total_steps);

// L2 norm over all trainable gradients (double accumulation, deterministic).
double global_grad_norm(ExecContext& ctx, const std::vector<Parameter*>& params);
// The factor that brings a gradient norm down to max_norm: max_norm / (norm + 1e-6), or 1 when
// max_norm <= 0 or the norm is not larger.
float clip_factor(double norm, float max_norm);
// Scales gradients so the global norm is at most max_norm (no-op when max_norm <= 0 or the
// norm is smaller). Returns the scale applied (1 when none).
float clip_grad_norm(ExecContext& ctx, const std::vector<Parameter*>& params, double norm,
                     float max_norm);

}  // namespace braid
