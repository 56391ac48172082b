// MicroBatch: the state of one micro-batch between its forward and its backward.
//
// - The stash (Saved): what each layer's forward keeps for its backward, LIFO.
// - A queue of deferred weight-gradient work: with defer_weight_grads on, a linear layer's
//   backward computes only its input gradient and queues its weight GEMM (with the input and
//   dy it needs) here; the caller runs the queue later (zero-bubble pipeline schedules).
// - on_grad_ready: called exactly once per trainable parameter per micro-batch, when that
//   parameter's gradient contribution from this micro-batch is complete (so data-parallel
//   buckets can start their all-reduce during the backward).
// Several micro-batches may be in flight at once (a pipeline keeps one per micro-batch); all
// run on the same ExecContext.
#pragma once

#include <functional>
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

  // The activation stash.
  void push(Tensor t) { stash_.push(std::move(t)); }
  Tensor pop() { return stash_.pop(); }
  size_t stash_size() const { return stash_.size(); }
  void clear_stash() { stash_.clear(); }

  // Deferred weight-gradient work.
  bool defer_weight_grads() const { return defer_weight_grads_; }
  // Queues `work`; once it has run, `params` (in this order) are reported ready.
  void defer(std::function<void()> work, std::vector<Parameter*> params);
  size_t deferred() const { return queue_.size(); }
  // Runs the queued work in the order it was queued (reverse order of use).
  void run_deferred();

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
  Saved stash_;
  std::vector<Deferred> queue_;
};

// What incremental decoding (Module::infer) needs besides the input: the context, the KV cache
// of the sequence and the absolute position of the input's first column.
struct KVCache;
struct InferState {
  ExecContext& ctx;
  KVCache* cache = nullptr;
  int64_t pos = 0;
};

}  // namespace braid
