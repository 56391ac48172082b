// The optimizer a run trains with, from its config and layout: AdamW, or ZeroAdamW (optim.zero 1
// on a data-parallel group of two or more ranks), wrapped in MixedPrecision for bf16/fp16
// (optim/optimizer.h); and the test hook that poisons a gradient as an fp16 overflow would.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/parameter.h"
#include "launch/train/fault_points.h"
#include "launch/config/train_config.h"
#include "optim/optimizer.h"
#include "parallel/data_parallel.h"

namespace braid {

// params: every parameter this rank trains, in model order, with the f32 values training
// starts from; dp: built over them (a sharded one makes this ZeRO-1); groups: what the model is
// split over besides data parallelism. With bf16/fp16 the parameters' values become 16-bit here.
std::unique_ptr<Optimizer> make_optimizer(ExecContext& ctx, const RunConfig& cfg,
                                          const std::vector<Parameter*>& params, DataParallel& dp,
                                          const ModelGroups& groups);

// --test-fault overflow_at_step=N[:DP_RANK] (bf16/fp16 runs only): after step N's backward,
// one gradient is set to inf, as an fp16 overflow would leave it. With ZeRO-1 an inf in one
// rank's gradient reaches only the rank that owns that element after the reduce-scatter, so
// the hook poisons only DP rank DP_RANK's shard (default 0): the global norm
// must then skip the step on every rank.
class OverflowTestHook {
 public:
  OverflowTestHook(const TrainConfig& cfg, const FaultPoints& faults);
  // After the gradients are reduced, before their norm; `step` is 1-based.
  void after_backward(int64_t step, Optimizer& opt, const DataParallel& dp) const;

 private:
  int inject_rank_ = 0;
  int64_t inject_step_ = -1;
};

}  // namespace braid
