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
// Driven by MicroBatch::on_grad_ready. Only during the step's last micro-batch does a complete
// bucket start its collective (earlier micro-batches of an accumulation step only accumulate);
// buckets start in bucket order on every rank, whatever order their last gradients arrive in,
// because collectives must be issued in the same order on every member. finish() starts any
// bucket still pending and waits for all; call it before the gradient norm and clipping.
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
  // buffer, reduce that, and convert back (halving the bytes, rounding the sum).
  DType comm_dtype = DType::F32;
  // Sum when each rank's gradients are already scaled by 1 / (tokens of the global batch);
  // Avg when they are scaled by 1 / (tokens of this rank's share).
  ReduceOp op = ReduceOp::Sum;
  // ZeRO-1: reduce-scatter instead of all-reduce; each rank then holds only its shard of each
  // bucket's reduced gradient (shard()). Buckets are zero-padded to a multiple of the group size.
  bool reduce_scatter = false;
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
    int ready = 0;            // gradients reported final in this micro-batch
    bool started = false;
    Work work;
  };

  // params: the model's parameters in order of first use (Transformer::parameters()).
  GradBuckets(ExecContext& ctx, const std::vector<Parameter*>& params, Communicator& comm,
              const GradBucketOptions& options);
  GradBuckets(const GradBuckets&) = delete;
  GradBuckets& operator=(const GradBuckets&) = delete;

  // Installs the grad-ready hook on mb; `last` marks the step's last micro-batch, the only one
  // that communicates.
  void attach(MicroBatch& mb, bool last);
  // Reports p's gradient final for the current micro-batch (what the hook calls).
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

  Communicator& comm_;
  GradBucketOptions options_;
  std::vector<Bucket> buckets_;
  std::unordered_map<const Parameter*, size_t> bucket_of_;
  bool last_ = false;
  size_t next_start_ = 0;  // buckets [0, next_start_) have started
};

}  // namespace braid
