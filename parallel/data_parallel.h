// DataParallel: the data-parallel part of one rank's training step, over its DP group.
//
// It owns the gradient buckets (parallel/grad_buckets.h) and their lifecycle in a step:
//   begin_step(m)        the step has m micro-batches on this rank
//   attach(mb)           on every micro-batch before its forward: its grad-ready reports go to
//                        the buckets, which start their all-reduce (or, ZeRO-1, reduce-scatter)
//                        as soon as they are final, overlapping the rest of the backward
//   finish()             after the schedule: the late contributions (GPT-2's tied embedding,
//                        kv heads shared by tensor-parallel ranks: summed by the model's step)
//                        reported, every bucket reduced
// and, with ZeRO-1 (sharded()), the other half of the exchange: the parameters live in one flat
// buffer per bucket (the gradients' layout, in the compute dtype), each rank updates its shard
// of every bucket (param_shard), and gather_parameters() all-gathers the shards.
//
// A group of one (one process, or dp = 1 under tensor/pipeline parallelism) takes the same
// path: its collectives leave the data as it is (parallel/self_communicator.h) and its buckets
// never round to a 16-bit wire type. ZeRO-1 needs two or more ranks and is off on a group of one.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/context.h"
#include "core/micro_batch.h"
#include "core/parameter.h"
#include "parallel/communicator.h"
#include "parallel/grad_buckets.h"

namespace braid {

struct DataParallelOptions {
  // Bucket sizes, wire dtype and reduction (GradBucketOptions::reduce_scatter is set from
  // shard_optimizer, not read).
  GradBucketOptions buckets;
  // ZeRO-1: gradients reduce-scattered, every rank updating its shard of the parameters, which
  // are then all-gathered. Takes effect only on a group of two or more ranks.
  bool shard_optimizer = false;
};

class DataParallel {
 public:
  // params: this rank's parameters in order of first use (bound into the buckets here; frozen
  // ones stay out). late: those whose gradient gets one contribution after the micro-batches.
  DataParallel(ExecContext& ctx, const std::vector<Parameter*>& params,
               const std::vector<Parameter*>& late, Communicator& dp,
               const DataParallelOptions& options);
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  // ---- one step's gradients
  void begin_step(int micro_batches);
  void attach(MicroBatch& mb);
  // Reports the late contributions and waits for every bucket: the bound gradients (or, when
  // sharded, the shards) hold the reduction over the group. Call before the gradient norm.
  void finish();

  Communicator& comm() const { return buckets_->comm(); }
  int size() const { return comm().size(); }
  int rank() const { return comm().rank(); }
  bool sharded() const { return buckets_->options().reduce_scatter; }
  const GradBuckets& buckets() const { return *buckets_; }

  // ---- ZeRO-1: the parameter shards (sharded() only)
  // Moves every bucketed parameter's value into its bucket's flat parameter buffer (same
  // offsets as its gradient), converted to `compute` (f32: copied; bf16/f16: rounded), and
  // keeps a send buffer per bucket for the gather. Once, before training; the caller keeps
  // whatever f32 values it needs (masters) before calling it.
  void bind_parameters(ExecContext& ctx, DType compute);
  // This rank's shard of bucket b's parameter buffer (shard_begin(b), shard_numel(b)): what an
  // optimizer updates in place (f32) or writes its rounded masters into (bf16/f16).
  Tensor param_shard(size_t b) const;
  // Every rank's shard to every rank, for every bucket (issued together, then waited): after
  // it each rank holds the whole new parameters. Collective over the group.
  void gather_parameters();

 private:
  std::unique_ptr<GradBuckets> buckets_;
  std::vector<Parameter*> late_;
  struct ParamBuffer {
    Tensor values;  // (bucket numel,) compute dtype, MemCategory::Weights: the bound values
    Tensor send;    // (shard numel,) compute dtype, MemCategory::Communication
  };
  std::vector<ParamBuffer> params_;  // per bucket, after bind_parameters
  ExecContext* ctx_ = nullptr;       // bind_parameters' context: the gather's copies run on it
};

}  // namespace braid
