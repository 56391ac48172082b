// Region modules: the tensor- and sequence-parallel collectives between the layers.
#include "parallel/tp_regions.h"

#include "parallel/comm_streams.h"
#include "parallel/sequence_parallel.h"

namespace braid {

namespace {
// In place; on a GPU the context's stream waits for the sum, the host does not.
Tensor all_reduce_sum(ExecContext& ctx, Communicator& tp, Tensor t) {
  wait_in_stream(ctx, tp.all_reduce(t, ReduceOp::Sum));
  return t;
}
}  // namespace

Tensor CopyToRegion::forward(const Tensor& x, MicroBatch&) { return x; }
Tensor CopyToRegion::infer(const Tensor& x, InferState&) { return x; }
Tensor CopyToRegion::backward(const Tensor& dy, MicroBatch& mb) {
  return all_reduce_sum(mb.ctx(), tp_, dy);
}

Tensor ReduceFromRegion::forward(const Tensor& x, MicroBatch& mb) {
  return all_reduce_sum(mb.ctx(), tp_, x);
}
Tensor ReduceFromRegion::infer(const Tensor& x, InferState& st) {
  return all_reduce_sum(st.ctx, tp_, x);
}
Tensor ReduceFromRegion::backward(const Tensor& dy, MicroBatch&) { return dy; }

Tensor GatherSequence::forward(const Tensor& x, MicroBatch& mb) {
  ExecContext& ctx = mb.ctx();
  Tensor whole = seq_all_gather(ctx, tp_, x);
  Communicator& tp = tp_;
  mb.recompute_later(whole, [&ctx, &tp, x] { return seq_all_gather(ctx, tp, x); });
  return whole;
}
Tensor GatherSequence::infer(const Tensor& x, InferState& st) {
  return seq_all_gather(st.ctx, tp_, x);
}
Tensor GatherSequence::backward(const Tensor& dy, MicroBatch& mb) {
  return seq_reduce_scatter(mb.ctx(), tp_, dy, dy.dtype());
}

Tensor ScatterSequence::forward(const Tensor& x, MicroBatch& mb) {
  return seq_reduce_scatter(mb.ctx(), tp_, x, x.dtype());
}
Tensor ScatterSequence::infer(const Tensor& x, InferState& st) {
  return seq_reduce_scatter(st.ctx, tp_, x, x.dtype());
}
Tensor ScatterSequence::backward(const Tensor& dy, MicroBatch& mb) {
  return seq_all_gather(mb.ctx(), tp_, dy);
}

std::unique_ptr<Module> enter_region(const std::string& path, Communicator& tp,
                                     bool sequence_parallel) {
  if (sequence_parallel) return std::make_unique<GatherSequence>(path, tp);
  return std::make_unique<CopyToRegion>(path, tp);
}

std::unique_ptr<Module> exit_region(const std::string& path, Communicator& tp,
                                    bool sequence_parallel) {
  if (sequence_parallel) return std::make_unique<ScatterSequence>(path, tp);
  return std::make_unique<ReduceFromRegion>(path, tp);
}

}  // namespace braid
