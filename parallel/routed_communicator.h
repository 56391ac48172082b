// RoutedCommunicator: one process group over two transports, chosen by where a tensor lives.
// A GPU run's groups move activations and gradients in device memory (NCCL) and a few host
// scalars (losses, token counts, squared norms, stop flags: parallel/scalar_reduce.h) in host
// memory (MPI); the trainer holds one Communicator per group either way.
#pragma once

#include <memory>
#include <string>

#include "parallel/communicator.h"

namespace braid {

class RoutedCommunicator final : public Communicator {
 public:
  // `device` and `host` must have the same members in the same group-rank order (e.g. a NCCL
  // group bootstrapped over the MPI group `host`); `host` must outlive this object. Each
  // operation runs entirely on one of them: device tensors on `device`, host tensors on
  // `host`; an operation whose tensors are on both is refused (braid::Error). Issue order is
  // kept per transport, which is what each needs: every member issues the same sequence.
  RoutedCommunicator(std::unique_ptr<Communicator> device, Communicator& host);

  Work all_reduce(Tensor t, ReduceOp op) override;
  Work reduce_scatter(Tensor in, Tensor out, ReduceOp op) override;
  Work all_gather(Tensor in, Tensor out) override;
  Work broadcast(Tensor t, int root) override;
  Work send(Tensor t, int peer, int tag = 0) override;
  Work recv(Tensor t, int peer, int tag = 0) override;
  // Both transports: the device barrier completes first, then the host one.
  Work barrier() override;

  Communicator& device() { return *device_; }
  Communicator& host() { return host_; }

 private:
  Communicator& pick(const Tensor& t, const char* op);
  Communicator& pick(const Tensor& in, const Tensor& out, const char* op);

  std::unique_ptr<Communicator> device_;
  Communicator& host_;
};

}  // namespace braid
