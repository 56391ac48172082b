// ZeroAdamW: AdamW with its state sharded over the data-parallel group (ZeRO stage 1).
//
// Works on GradBuckets in reduce-scatter mode: each bucket is split into dp equal parts and DP
// rank r owns part r of every bucket (one contiguous range of the bucket's flat space per
// bucket: per-bucket collectives are what lets the reduction overlap the backward). A rank keeps
// AdamW moments only for what it owns, so optimizer memory per rank is about 1/dp of plain
// AdamW. The parameters are re-bound into one flat buffer per bucket (same layout as the
// gradients), so after each rank updates its part an all-gather per bucket gives every rank the
// whole new parameters. Updates use the same adamw_update kernel and constants as AdamW.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/context.h"
#include "optim/optim_config.h"
#include "parallel/grad_buckets.h"

namespace braid {

class ZeroAdamW {
 public:
  // buckets: reduce-scatter mode, built over the model's parameters on the DP communicator.
  ZeroAdamW(ExecContext& ctx, GradBuckets& buckets, const OptimConfig& cfg);

  // L2 norm of the reduced gradient over every rank's shards (after buckets.finish()); the
  // same double on every rank. Collective.
  double grad_norm();
  // Scales this rank's reduced shards so the global norm is at most max_norm (as clip_grad_norm).
  void clip(double norm, float max_norm);
  // Updates this rank's shards, then all-gathers the parameters. Collective.
  void step(float lr);
  int64_t steps_taken() const { return t_; }

  // The whole moments as "<param>.exp_avg" / "<param>.exp_avg_sq" (AdamW's checkpoint names
  // and shapes, so a checkpoint loads into any DP size with or without ZeRO). Collective.
  std::vector<std::pair<std::string, Tensor>> gather_state();
  // Takes this rank's shard of each whole moment get(name) returns.
  void load_state(const std::function<Tensor(const std::string&)>& get, int64_t steps_taken);

 private:
  // The part of one parameter inside this rank's shard of its bucket.
  struct Segment {
    Parameter* p;
    size_t bucket;
    int64_t param_begin;  // first element within the parameter
    int64_t shard_begin;  // first element within the shard
    int64_t numel;
    bool decay;
  };
  struct Shard {
    Tensor values;  // (bucket numel,) the bucket's parameters, MemCategory::Weights
    Tensor m, v;    // (shard numel,) MemCategory::OptimizerState
    Tensor send;    // (shard numel,) all-gather input, MemCategory::Communication
  };
  ExecContext& ctx_;
  GradBuckets& buckets_;
  OptimConfig cfg_;
  std::vector<Shard> shards_;
  std::vector<Segment> segments_;
  int64_t t_ = 0;
};

}  // namespace braid
