// Parameter: a named tensor with its gradient, shard spec and trainable flag.
#pragma once

#include <string>
#include <vector>

#include "core/tensor.h"

namespace braid {

class ExecContext;

// How a parameter is split across tensor-parallel ranks. A tensor-parallel pass sets `dim`
// and `parts`; the model declares `blocks` for fused tensors whose sub-blocks split
// separately: GPT-2's c_attn weight (3C, C) is blocks {C, C, C} along dim 0, so part r holds
// rows [r C/parts, (r+1) C/parts) of each of q, k and v (splitting by head within each).
struct ShardSpec {
  int dim = -1;                 // the split dimension; -1: replicated on every rank
  int parts = 1;                // how many ranks share it
  std::vector<int64_t> blocks;  // global sizes of fused sub-blocks along dim; empty: one block
  // The size of `dim` before zero padding made it divisible (tensor parallelism pads the
  // vocabulary); -1: no padding. Checkpoints store whole tensors cut back to it.
  int64_t logical = -1;
  // Tensor-parallel ranks holding each part: 1, or tp / parts when a group of ranks shares one
  // part (Llama's kv heads when tp > n_kv_head: each rank keeps its kv head, replicated over
  // tp / n_kv_head ranks), or tp for a whole tensor (parts 1) that every rank applies to its
  // slice of the sequences (the norms under sequence parallelism). Rank r holds part
  // r / replicas. A replicated part's gradient is the sum of its holders' partial gradients.
  int replicas = 1;
  int part_of(int rank) const { return rank / replicas; }

  bool sharded() const { return dim >= 0 && parts > 1; }
  // The local shape of part `part` of a tensor of `global` shape.
  Shape local_shape(const Shape& global) const;
  // [begin, end) along `dim` of each sub-block owned by `part` (global indices).
  std::vector<std::pair<int64_t, int64_t>> ranges(const Shape& global, int part) const;
  // Throws (naming `what`) unless every block divides evenly by parts.
  void validate(const Shape& global, const std::string& what) const;
};

// The part of `full` (global shape) that `part` owns, as a new tensor from full's allocator
// (the extract_ranges kernel, core/kernels/shard_copy.h, on ctx's device); a meta tensor of
// the part's shape when `full` is meta.
Tensor extract_shard(ExecContext& ctx, const Tensor& full, const ShardSpec& spec, int part);
// Writes `shard` into its place in `full` (insert_ranges).
void insert_shard(ExecContext& ctx, Tensor& full, const Tensor& shard, const ShardSpec& spec,
                  int part);
// The same on host tensors without a context (checkpoint files, an init drawn on the host);
// a device tensor needs the overloads above.
Tensor extract_shard(const Tensor& full, const ShardSpec& spec, int part);
void insert_shard(Tensor& full, const Tensor& shard, const ShardSpec& spec, int part);

class Parameter {
 public:
  // value: the (local) tensor; the global shape is its shape until a pass shards it.
  Parameter(std::string name, Tensor value, bool trainable = true);

  // HF-compatible name, e.g. transformer.h.3.attn.c_attn.weight; checkpoints and HF
  // import/export are driven by it.
  std::string name;
  Tensor value;        // MemCategory::Weights
  Shape global_shape;  // the whole tensor across tensor-parallel ranks
  ShardSpec shard;
  bool trainable = true;
  // A replica of a parameter owned elsewhere (GPT-2's tied embedding on the last pipeline
  // stage): trained like any other, but not saved by this stage.
  bool replica = false;
  // A 16-bit copy of value that an optimizer's update rewrites, rounded, in the same pass (the
  // compute weights of f32 masters: optim/master_weights.h sets it before each step); undefined
  // when there is none.
  Tensor rounded_copy;

  // The gradient (MemCategory::Grads, value's shape), allocated and zeroed on first use from
  // the value's allocator unless bind_grad gave it a buffer. Only for trainable parameters:
  // frozen ones never have one. A zeroing deferred by defer_zero_grad happens here first.
  Tensor& grad();
  // The gradient if it exists (zeroed first if a zeroing was deferred), else an undefined
  // tensor (frozen, or not yet touched).
  const Tensor& grad_if_any() const;
  bool has_grad() const { return grad_.defined(); }
  // Makes `view` (same shape and dtype as value, e.g. a slice of a flat bucket) the gradient
  // buffer. The caller owns its contents: binding does not zero it.
  void bind_grad(Tensor view);
  void zero_grad();  // zeroes an existing gradient (no-op when none)
  // Zeroes an existing gradient lazily: its contents read as zero from now on, but the zeros are
  // written (by `zero` on ctx, which must outlive the step) only when grad() or grad_if_any()
  // next hands the tensor out, and never when grad_for_overwrite does: a step's first
  // contribution can then write the gradient instead of adding onto a zeroed buffer.
  void defer_zero_grad(ExecContext& ctx);
  // The gradient for a caller about to produce one contribution. *overwrite is true when the
  // contents are a deferred zero: the caller must then write every element (= instead of +=);
  // false: it adds as usual.
  Tensor& grad_for_overwrite(bool* overwrite);
  // Freezes the parameter and drops its gradient.
  void freeze();

 private:
  void settle_grad() const;  // writes a deferred zeroing
  mutable Tensor grad_;
  mutable ExecContext* zero_pending_ = nullptr;  // set by defer_zero_grad until settled
};

}  // namespace braid
