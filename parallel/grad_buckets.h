// GradBuckets: data-parallel gradient buckets whose reduction overlaps the backward pass.
//
// Trainable parameters are grouped in reverse order of use (the order their gradients become
// final during backward) into buckets of at most bucket_bytes (the first, holding the last
// layers, at most first_bucket_bytes so communication starts early; a single larger parameter
// gets a bucket of its own). Each bucket is one contiguous f32 buffer on the ExecContext
// (MemCategory::Grads) and every parameter's gradient is bound into it (Parameter::bind_grad),
// so the backward kernels accumulate straight into what is communicated: nothing is copied in
// or out per step. Frozen parameters never enter a bucket.
//
// Driven by MicroBatch::on_grad_ready: a gradient is final for the step when it has heard all
// of its contributions, one per micro-batch (begin_step(m)) plus any late ones (GPT-2's tied
// embedding under pipeline parallelism is final only after the sum over its two stages), in
// whatever order the schedule runs the micro-batches. A bucket starts its collective when all of
// its gradients are final; buckets start in bucket order on every rank, whatever order their last
// gradients arrive in, because collectives must be issued in the same order on every member.
// finish() starts any bucket still pending and waits for all; call it before the gradient norm
// and clipping.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "core/context.h"
#include "core/micro_batch.h"
#include "core/parameter.h"
#include "parallel/communicator.h"

namespace braid {

struct GradBucketOptions {
  int64_t bucket_bytes = int64_t{25} << 20;
  int64_t first_bucket_bytes = int64_t{1} << 20;
  // Element type on the wire: f32 reduces the buffer in place; bf16/f16 convert into a comm
  // buffer, reduce that, and convert back (halving the bytes, rounding the sum). A group of one
  // sends nothing, so it never rounds: its gradients stay f32 whatever this says.
  DType comm_dtype = DType::F32;
  // Sum when each rank's gradients are already scaled by 1 / (tokens of the global batch);
  // Avg when they are scaled by 1 / (tokens of this rank's share).
  ReduceOp op = ReduceOp::Sum;
  // ZeRO-1: reduce-scatter instead of all-reduce; each rank then holds only its shard of each
  // bucket's reduced gradient (shard()). Buckets are zero-padded to a multiple of the group size.
  bool reduce_scatter = false;
  // Reduce-scatter only: every parameter of at least align_min_numel elements starts at a
  // multiple of `align` elements in its bucket, and every shard is a multiple of `align`
  // elements, so no block of `align` elements of such a parameter (counted from its first
  // element) is split between two ranks' shards. adamw8bit under ZeRO-1 sets 2048, its
  // quantisation block, so a rank's 8-bit moments are whole blocks, as the unsharded optimizer's
  // are. The gaps are zero padding, as at a bucket's end.
  int64_t align = 1;
  int64_t align_min_numel = 0;
};

class GradBuckets {
 public:
  struct Slot {
    Parameter* param;
    int64_t offset;  // first element of the parameter's gradient in the bucket
    int64_t numel;
  };
  struct Bucket {
    std::vector<Slot> slots;  // in reverse order of use
    int64_t numel = 0;        // elements incl. padding (a multiple of the group size with RS)
    Tensor flat;              // (numel,) f32, MemCategory::Grads: the bound gradients
    Tensor comm;              // what is reduced: flat itself, or its 16-bit copy
    Tensor shard_comm;        // reduce-scatter output in comm_dtype
    Tensor shard;             // this rank's reduced part, f32 (== shard_comm for f32)
    int ready = 0;            // gradients final in this step
    bool started = false;
    Work work;
  };

  // params: the model's parameters in order of first use (Transformer::parameters()).
  // late: those of them whose gradient gets one more contribution after the step's micro-batches
  // (add_late_contribution); they go to buckets of their own after all the others, so that
  // waiting for them holds back no other bucket (buckets start in order).
  GradBuckets(ExecContext& ctx, const std::vector<Parameter*>& params, Communicator& comm,
              const GradBucketOptions& options, const std::vector<Parameter*>& late = {});
  GradBuckets(const GradBuckets&) = delete;
  GradBuckets& operator=(const GradBuckets&) = delete;

  // p's gradient gets one contribution per step beyond its micro-batches' (reported with
  // grad_ready after the step's micro-batches, e.g. after the tied-embedding sum). Call once,
  // before the first step.
  void add_late_contribution(const Parameter& p);
  // Starts a step of `micro_batches` micro-batches: resets the counts.
  void begin_step(int micro_batches);
  // Installs the grad-ready hook on mb.
  void attach(MicroBatch& mb);
  // The hook: one contribution to p's gradient is complete.
  void grad_ready(Parameter& p);
  // Starts every bucket not yet started (in order) and waits for all of them. After it the
  // bound gradients hold the reduction (all-reduce), or shard() does (reduce-scatter).
  void finish();

  const std::vector<Bucket>& buckets() const { return buckets_; }
  Communicator& comm() const { return comm_; }
  const GradBucketOptions& options() const { return options_; }
  // [begin, end) of this rank's shard within bucket b (reduce-scatter mode).
  int64_t shard_begin(size_t b) const;
  int64_t shard_numel(size_t b) const;
  // The reduced gradient of this rank's shard of bucket b (reduce-scatter mode, after finish()).
  const Tensor& shard(size_t b) const { return buckets_[b].shard; }
  int64_t total_numel() const;  // elements over all buckets, padding included

 private:
  void start(Bucket& b);
  void start_ready_in_order();

  ExecContext& ctx_;  // the casts to and from the wire dtype run on its device
  Communicator& comm_;
  GradBucketOptions options_;
  bool convert_;  // 16-bit on the wire (comm_dtype, and more than one rank)
  std::vector<Bucket> buckets_;
  struct Member {
    size_t bucket;
    int late = 0;   // contributions beyond the micro-batches'
    int heard = 0;  // contributions complete in this step
  };
  std::unordered_map<const Parameter*, Member> member_;
  int micro_batches_ = 0;  // of the current step; 0 outside a step
  size_t next_start_ = 0;  // buckets [0, next_start_) have started
};

}  // namespace braid
