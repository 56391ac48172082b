// MicroBatch: the state of one micro-batch between its forward and its backward.
//
// - The stash (Saved): what each layer's forward keeps for its backward, LIFO.
// - A queue of deferred weight-gradient work: with defer_weight_grads on, a linear layer's
//   backward computes only its input gradient and queues its weight GEMM (with the input and
//   dy it needs) here; the caller runs the queue later (zero-bubble pipeline schedules).
// - on_grad_ready: called exactly once per trainable parameter per micro-batch, when that
//   parameter's gradient contribution from this micro-batch is complete (so data-parallel
//   buckets can start their all-reduce during the backward).
// - Recomputation hooks (recompute_later): a tensor that later layers would stash can be kept
//   as a recipe instead and rebuilt when popped (selective activation checkpointing).
// - dropout_seed: the micro-batch's random stream for dropout, a pure function of the run's
//   seed, step and micro-batch index (set by the trainer), so a recomputed forward draws the
//   same masks and a resumed run the same as an uninterrupted one. 0: no dropout (evaluation).
// - sample_starts: packed sequences (several samples per row, data.packing); see below.
// Several micro-batches may be in flight at once (a pipeline keeps one per micro-batch); all
// run on the same ExecContext.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/parameter.h"
#include "core/saved.h"

namespace braid {

class MicroBatch {
 public:
  explicit MicroBatch(ExecContext& ctx, bool defer_weight_grads = false)
      : ctx_(ctx), defer_weight_grads_(defer_weight_grads) {}
  MicroBatch(const MicroBatch&) = delete;
  MicroBatch& operator=(const MicroBatch&) = delete;

  ExecContext& ctx() const { return ctx_; }

  // The activation stash. A push of a tensor given to recompute_later keeps its recipe.
  void push(Tensor t);
  Tensor pop() { return stash_.pop(); }
  // `t` need not stay in memory: while it is alive, pushes of it (same storage, offset and
  // shape) keep `rebuild` instead, and pop() returns rebuild()'s result. rebuild must give
  // the same values (the same kernels on inputs that are kept anyway).
  void recompute_later(const Tensor& t, std::function<Tensor()> rebuild);
  size_t stash_size() const { return stash_.size(); }
  void clear_stash() { stash_.clear(); }

  // Deferred weight-gradient work.
  bool defer_weight_grads() const { return defer_weight_grads_; }
  // Queues `work`; once it has run, `params` (in this order) are reported ready.
  void defer(std::function<void()> work, std::vector<Parameter*> params);
  size_t deferred() const { return queue_.size(); }
  // Runs the queued work in the order it was queued (reverse order of use).
  void run_deferred();
  // Appends other's queued work to this queue (full recomputation runs a block's backward on
  // a fresh micro-batch; its deferred weight GEMMs still belong to this one).
  void adopt_deferred(MicroBatch& other);

  uint64_t dropout_seed = 0;

  // Packed sequences: (B, T) i32 on the host, the position where the sample holding each
  // position begins (data/sampler.h); undefined: every row is one sequence. Attention hides
  // the keys of other samples, and positions (RoPE and learned) restart at 0 at every sample
  // start, so a packed sample computes what it would alone.
  Tensor sample_starts;

  // Grad-ready reporting.
  std::function<void(Parameter&)> on_grad_ready;
  void grad_ready(Parameter& p) {
    if (on_grad_ready) on_grad_ready(p);
  }

 private:
  struct Deferred {
    std::function<void()> work;
    std::vector<Parameter*> params;
  };
  ExecContext& ctx_;
  bool defer_weight_grads_;
  struct Recomputable {
    std::weak_ptr<const Storage> storage;
    const void* data;
    Shape shape;
    std::shared_ptr<Recipe> recipe;
  };
  Saved stash_;
  std::vector<Deferred> queue_;
  std::vector<Recomputable> recomputable_;  // entries die with their tensor
};

// One sample of a packed micro-batch: positions [begin, end) of batch row `row`.
struct SampleSpan {
  int64_t row, begin, end;
};
// The samples described by sample_starts (B, T) i32, row by row.
std::vector<SampleSpan> sample_spans(const Tensor& sample_starts);
// Positions [s.begin, s.end) of row s.row of x: (B, T, ...) as a (1, end - begin, ...) view.
Tensor span_view(const Tensor& x, const SampleSpan& s);

// What incremental decoding (Module::infer) needs besides the input: the context, the KV cache
// of the sequence and the absolute position of the input's first column.
struct KVCache;
struct InferState {
  ExecContext& ctx;
  KVCache* cache = nullptr;
  int64_t pos = 0;
  // Packed samples (as MicroBatch::sample_starts): the embedding restarts learned positions at
  // each sample. Only evaluation sets it (no KV cache).
  Tensor sample_starts = Tensor();
};

}  // namespace braid
