// SelfCommunicator: the collectives of a one-member group, done in place at once.
#include "parallel/self_communicator.h"

#include "core/error.h"

namespace braid {

SelfCommunicator::SelfCommunicator(std::string name, int world_rank, double timeout_s)
    : Communicator(std::move(name), {world_rank}, 0, timeout_s) {}

void SelfCommunicator::check_tensor(const Tensor& t, const char* op, const char* arg) const {
  BRAID_CHECK(t.defined(), "{} on group '{}': {} is an undefined tensor", op, name(), arg);
}

void SelfCommunicator::check_pair(const Tensor& in, const Tensor& out, const char* op) const {
  check_tensor(in, op, "in");
  check_tensor(out, op, "out");
  BRAID_CHECK(in.dtype() == out.dtype() && in.numel() == out.numel(),
              "{} on group '{}' (one member): in is {}[{}] but out is {}[{}]; a group of one "
              "needs the same element type and count",
              op, name(), dtype_name(in.dtype()), in.numel(), dtype_name(out.dtype()), out.numel());
}

Work SelfCommunicator::all_reduce(Tensor t, ReduceOp op) {
  check_tensor(t, "all_reduce", "t");
  BRAID_CHECK(!(op == ReduceOp::Avg && t.dtype() == DType::I32),
              "all_reduce on group '{}': avg is not defined for i32", name());
  return Work::completed();  // one member: the reduction is t itself
}

Work SelfCommunicator::reduce_scatter(Tensor in, Tensor out, ReduceOp op) {
  check_pair(in, out, "reduce_scatter");
  BRAID_CHECK(!(op == ReduceOp::Avg && in.dtype() == DType::I32),
              "reduce_scatter on group '{}': avg is not defined for i32", name());
  BRAID_CHECK(!in.same_storage(out) || in.numel() == 0,
              "reduce_scatter on group '{}': in and out share storage", name());
  out.copy_from(in);
  return Work::completed();
}

Work SelfCommunicator::all_gather(Tensor in, Tensor out) {
  check_pair(in, out, "all_gather");
  if (!(in.same_storage(out) && in.raw() == out.raw())) out.copy_from(in);
  return Work::completed();
}

Work SelfCommunicator::broadcast(Tensor t, int root) {
  check_tensor(t, "broadcast", "t");
  BRAID_CHECK(root == 0, "broadcast on group '{}': root {} outside 0..0", name(), root);
  return Work::completed();
}

Work SelfCommunicator::send(Tensor t, int peer, int /*tag*/) {
  check_tensor(t, "send", "t");
  BRAID_CHECK(false, "send on group '{}': peer {} is not another member of 0..0", name(), peer);
  return {};
}

Work SelfCommunicator::recv(Tensor t, int peer, int /*tag*/) {
  check_tensor(t, "recv", "t");
  BRAID_CHECK(false, "recv on group '{}': peer {} is not another member of 0..0", name(), peer);
  return {};
}

Work SelfCommunicator::barrier() { return Work::completed(); }

}  // namespace braid
