// make_optimizer and the overflow test hook.
#include "launch/train/train_optimizer.h"

#include <cmath>

#include "core/error.h"
#include "optim/adamw.h"
#include "optim/mixed_precision.h"
#include "optim/zero_adamw.h"

namespace braid {

std::unique_ptr<Optimizer> make_optimizer(ExecContext& ctx, const RunConfig& cfg,
                                          const std::vector<Parameter*>& params, DataParallel& dp,
                                          const ModelGroups& groups) {
  const DType dt = precision_dtype(cfg.train.precision);
  // ZeRO-1 first: with bf16/fp16 it converts the trainable weights and keeps f32 masters of
  // its shard only, and MixedPrecision leaves those to it.
  std::unique_ptr<Optimizer> zero;
  if (dp.sharded()) zero = std::make_unique<ZeroAdamW>(ctx, dp, cfg.optim, dt, groups);
  auto trainable = [&](std::vector<Parameter*> ps) -> std::unique_ptr<Optimizer> {
    if (zero) return std::move(zero);
    return std::make_unique<AdamW>(ctx, std::move(ps), cfg.optim, groups);
  };
  if (dt == DType::F32) return trainable(params);
  return std::make_unique<MixedPrecision>(ctx, params, dt, cfg.train.loss_scale, trainable);
}

OverflowTestHook::OverflowTestHook(const TrainConfig& cfg, const FaultPoints& faults) {
  if (precision_dtype(cfg.precision) == DType::F32) return;
  inject_step_ = faults.overflow_step;
  inject_rank_ = faults.overflow_dp_rank;
}

void OverflowTestHook::after_backward(int64_t step, Optimizer& opt, const DataParallel& dp) const {
  if (step != inject_step_) return;
  if (opt.sharded() && dp.rank() != inject_rank_) return;
  const std::vector<Tensor> grads = opt.grads();
  if (grads.empty()) return;
  Tensor g = grads[0];
  g.fill_(INFINITY);  // one inf gradient is an overflow
}

}  // namespace braid
