// RoutedCommunicator: device tensors on one transport, host tensors on the other.
#include "parallel/routed_communicator.h"

#include "core/error.h"

namespace braid {

RoutedCommunicator::RoutedCommunicator(std::unique_ptr<Communicator> device, Communicator& host)
    : Communicator(host.name(), host.world_ranks(), host.rank(), host.timeout_s()),
      device_(std::move(device)),
      host_(host) {
  BRAID_CHECK(device_ != nullptr, "group '{}': no device communicator", host.name());
  BRAID_CHECK(device_->world_ranks() == host.world_ranks() && device_->rank() == host.rank(),
              "group '{}': the device group ('{}', rank {} of {}) has other members than the "
              "host group (rank {} of {})",
              host.name(), device_->name(), device_->rank(), device_->size(), host.rank(),
              host.size());
}

Communicator& RoutedCommunicator::pick(const Tensor& t, const char* op) {
  BRAID_CHECK(t.defined(), "{} on group '{}': an undefined tensor", op, name());
  return t.device().is_cpu() ? host_ : *device_;
}

Communicator& RoutedCommunicator::pick(const Tensor& in, const Tensor& out, const char* op) {
  Communicator& c = pick(in, op);
  BRAID_CHECK(&pick(out, op) == &c,
              "{} on group '{}': input on {} and output on {}; both must be in host memory or "
              "both in device memory",
              op, name(), in.device().str(), out.device().str());
  return c;
}

Work RoutedCommunicator::all_reduce(Tensor t, ReduceOp op) {
  return pick(t, "all_reduce").all_reduce(std::move(t), op);
}

Work RoutedCommunicator::reduce_scatter(Tensor in, Tensor out, ReduceOp op) {
  return pick(in, out, "reduce_scatter").reduce_scatter(std::move(in), std::move(out), op);
}

Work RoutedCommunicator::all_gather(Tensor in, Tensor out) {
  return pick(in, out, "all_gather").all_gather(std::move(in), std::move(out));
}

Work RoutedCommunicator::broadcast(Tensor t, int root) {
  return pick(t, "broadcast").broadcast(std::move(t), root);
}

Work RoutedCommunicator::send(Tensor t, int peer, int tag) {
  return pick(t, "send").send(std::move(t), peer, tag);
}

Work RoutedCommunicator::recv(Tensor t, int peer, int tag) {
  return pick(t, "recv").recv(std::move(t), peer, tag);
}

Work RoutedCommunicator::barrier() {
  device_->barrier().wait();
  return host_.barrier();
}

}  // namespace braid
