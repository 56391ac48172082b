// SelfCommunicator: the group of one process. Every collective is what any backend computes
// over a single member: all_reduce leaves t as it is (Sum, Max and Avg of one value are that
// value), reduce_scatter and all_gather copy in to out, broadcast from rank 0 and barrier do
// nothing; each returns an already finished Work. So a one-process run holds dp, tp and pp
// groups like any other and takes the same code path, with the same bits as code that skips
// the collective.
#pragma once

#include <string>

#include "parallel/communicator.h"

namespace braid {

class SelfCommunicator final : public Communicator {
 public:
  // world_rank: this process's rank in the job (0 for a one-process run), for world_ranks().
  explicit SelfCommunicator(std::string name, int world_rank = 0, double timeout_s = 300.0);

  Work all_reduce(Tensor t, ReduceOp op) override;
  Work reduce_scatter(Tensor in, Tensor out, ReduceOp op) override;
  Work all_gather(Tensor in, Tensor out) override;
  Work broadcast(Tensor t, int root) override;
  // A group of one has no peer: send and recv throw braid::Error, as every backend refuses a
  // transfer to the calling rank itself.
  Work send(Tensor t, int peer, int tag = 0) override;
  Work recv(Tensor t, int peer, int tag = 0) override;
  Work barrier() override;

 private:
  void check_tensor(const Tensor& t, const char* op, const char* arg) const;
  void check_pair(const Tensor& in, const Tensor& out, const char* op) const;
};

}  // namespace braid
