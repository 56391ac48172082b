// ZeroAdamW: AdamW with its state sharded over the data-parallel group (ZeRO stage 1).
//
// Works on a sharded DataParallel (parallel/data_parallel.h): its buckets reduce-scatter, each
// bucket split into dp equal parts, and DP rank r owns part r of every bucket (one contiguous
// range of the bucket's flat space per bucket: per-bucket collectives are what lets the
// reduction overlap the backward). A rank keeps AdamW moments only for what it owns, so
// optimizer memory per rank is about 1/dp of plain AdamW. The DataParallel holds the parameters
// in one flat buffer per bucket (same layout as the gradients); after each rank updates its part
// it all-gathers them, giving every rank the whole new parameters. Updates use the same
// adamw_update kernel and constants as AdamW.
//
// Mixed precision (compute bf16 or f16): the flat parameter buffer holds the compute dtype and
// a rank keeps f32 masters only for its shard (MemCategory::MasterWeights), beside its shard of
// the moments, so masters and moments both cost 1/dp per rank. After the shard update each rank
// rounds its new masters to the compute dtype and the all-gather moves those 16-bit values:
// half the bytes of an f32 gather, and the same result, because every rank would round the
// gathered f32 masters with the same round-to-nearest-even cast anyway.
//
// adamw8bit: the moments of every parameter of at least kAdam8bitMinNumel elements are 8-bit
// codes with one absmax per block of 2048 elements counted from the parameter's first element
// (optim/adamw.h). The DataParallel's buckets must then be built with GradBucketOptions::align
// = 2048 for such parameters (braid train does: launch/train/train_run.cpp), so that each
// parameter starts at a multiple of 2048 in its bucket and each shard is a multiple of 2048
// long: every block lies in one rank's shard. A rank holds the codes and absmax of its whole
// blocks and runs the same adamw8bit_update over them as AdamW does over the whole parameter,
// so the result equals the unsharded optimizer bit for bit. Smaller parameters keep f32
// moments, as in AdamW. The padding costs at most 2047 elements per parameter and bucket.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/context.h"
#include "optim/optim_config.h"
#include "optim/optimizer.h"
#include "parallel/data_parallel.h"

namespace braid {

class ZeroAdamW final : public Optimizer {
 public:
  // dp: sharded, built over the model's parameters. compute: the dtype the parameters compute
  // in; bf16/f16 converts the bucketed (trainable) parameters' f32 values to it (in the
  // DataParallel's buffers) and keeps this rank's shard of them as f32 masters. Build it before
  // MixedPrecision, which then leaves these parameters alone (MixedPrecision::use_zero).
  // groups: the model-parallel groups the model is split over (for grad_norm).
  ZeroAdamW(ExecContext& ctx, DataParallel& dp, const OptimConfig& cfg, DType compute = DType::F32,
            const ModelGroups& groups = {});

  // L2 norm of the reduced gradient over every rank's shards (after DataParallel::finish()),
  // and over the model-parallel groups when the model is split: split parameters summed over
  // tp (a part several ranks share counted once), replicated ones once, pipeline replicas (the
  // tied head's copy) skipped, stages summed over pp; model_parallel_grad_norm's rules on the
  // reduced shards. The same double on every rank. Collective over dp, tp and pp.
  double grad_norm() override;
  // The clip factor (clip_factor), applied inside the next step's update of this rank's shards.
  void clip(double norm, float max_norm) override;
  // Updates this rank's shards, then all-gathers the parameters. Collective.
  void step(float lr) override;
  int64_t steps_taken() const override { return t_; }
  // This rank's reduced gradient shards, one per bucket.
  std::vector<Tensor> grads() const override;
  DType compute_dtype() const { return compute_; }
  bool low_precision() const { return compute_ != DType::F32; }
  const GradBuckets& buckets() const { return buckets_; }
  DataParallel& data_parallel() const { return dp_; }
  // Multiplies this rank's reduced gradient shards by s (fp16: taking the loss scale out).
  void scale_grads(float s) override;

  bool sharded() const override { return true; }
  // Mixed precision: gather_masters() (collective), for the writer; f32: nullopt.
  std::optional<NamedTensors> checkpoint_masters(bool writer) override;
  // shard_state(*pieces).
  NamedTensors state_tensors(nlohmann::json* pieces) const override;
  // Mixed precision: "ZeRO-1: f32 masters and moments sharded over N DP ranks, ..."; f32: "".
  std::string describe(const ExecContext& ctx) const override;

  // The whole moments as "<param>.exp_avg" / "<param>.exp_avg_sq" (AdamW's checkpoint names
  // and shapes, so a checkpoint loads into any DP size with or without ZeRO). Collective.
  // adamw only (8-bit moments are saved as pieces, shard_state).
  std::vector<std::pair<std::string, Tensor>> gather_state();
  // This rank's part of the moments, for a checkpoint each rank writes itself: for every
  // parameter with elements in this rank's shard, "<param>.exp_avg" / ".exp_avg_sq" as a 1-D
  // piece of the flattened moment, and in `records` (name -> {"flat_begin", "global_shape"})
  // where the piece goes. 8-bit moments: AdamW's names "<param>.exp_avg_codes" (a piece of the
  // flattened u8 codes) and "<param>.exp_avg_absmax" (a piece of the per-block absmax, from
  // block param_begin / 2048), the same for exp_avg_sq. No communication.
  std::vector<std::pair<std::string, Tensor>> shard_state(nlohmann::json& records) const;
  // Takes this rank's shard of each whole moment get(name) returns (8-bit: of the whole codes
  // and absmax; throws UserError when the absmax does not have this parameter's block count).
  void load_state(const std::function<Tensor(const std::string&)>& get,
                  int64_t steps_taken) override;
  // Mixed precision: the whole f32 masters by parameter name (what checkpoints save; replicas
  // left out). Collective: an all-gather of the master shards.
  // keep false: takes part in the collective and returns nothing (a rank that does not write).
  // The result is in host memory.
  std::vector<std::pair<std::string, Tensor>> gather_masters(bool keep = true);
  // Mixed precision: takes this rank's shard of each whole f32 master get(name) returns and
  // rounds the whole tensor into the compute weights (every rank reads the whole file, so
  // this needs no communication and equals a shard cast followed by the all-gather).
  void load_masters(const std::function<Tensor(const std::string&)>& get);

 private:
  // The part of one parameter inside this rank's shard of its bucket.
  struct Segment {
    Parameter* p = nullptr;
    size_t bucket = 0;
    int64_t param_begin = 0;  // first element within the parameter
    int64_t shard_begin = 0;  // first element within the shard
    int64_t numel = 0;
    bool decay = false;
    // The segment's moments (MemCategory::OptimizerState): f32 m and v (views of the shard's
    // under adamw, its own under adamw8bit), or 8-bit codes (numel, u8) and absmax (one f32
    // per block of 2048).
    Tensor m, v, m_codes, m_absmax, v_codes, v_absmax;
    bool eight_bit() const { return m_codes.defined(); }
  };
  struct Shard {
    Tensor master;  // (shard numel,) f32 masters, MasterWeights; mixed precision only
    Tensor m, v;    // (shard numel,) MemCategory::OptimizerState; adamw only
  };
  // What the update writes for segment s: the f32 master, or (f32) the values themselves.
  Tensor update_target(const Segment& s);
  double dp_grad_norm();  // over the DP group only
  ExecContext& ctx_;
  DataParallel& dp_;
  const GradBuckets& buckets_;
  OptimConfig cfg_;
  DType compute_;
  ModelGroups groups_;
  std::vector<Shard> shards_;
  std::vector<Segment> segments_;
  int64_t t_ = 0;
  float grad_scale_ = 1.0f;  // clip's factor, applied by the next step
};

}  // namespace braid
