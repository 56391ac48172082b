// Communicator: collectives and point-to-point transfers on Tensors within one process group.
#pragma once

#include <string>
#include <vector>

#include "core/tensor.h"
#include "parallel/work.h"

namespace braid {

enum class ReduceOp { Sum, Avg, Max };
const char* reduce_op_name(ReduceOp op);  // "sum", "avg", "max"
// A tensor as a collective's error and timeout messages name it: "f32[1048576]".
std::string tensor_desc(const Tensor& t);

// One process group. Backends (MPI for host memory now, NCCL for device memory later) derive
// from it; nothing here names a library.
//
// Every method starts the operation and returns at once with a Work handle. The tensors must
// stay alive and untouched until the Work is done (the handle keeps their storage alive, not
// their contents). Collectives must be issued in the same order on every member, so issue them
// from one thread per communicator. Supported element types: f32, bf16, f16 (reduced in f32
// arithmetic, rounded once per combining step) and i32 (no Avg). An operation not finished
// within timeout_s() ends the whole job with a message naming the operation, the group, this
// rank and the peers: a pending collective cannot be cancelled, so there is no safe way to go on.
class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  const std::string& name() const { return name_; }
  // World ranks of the members, in group-rank order.
  const std::vector<int>& world_ranks() const { return world_ranks_; }
  int rank() const { return rank_; }  // this process's rank in the group
  int size() const { return static_cast<int>(world_ranks_.size()); }
  double timeout_s() const { return timeout_s_; }

  // t = op over the members' t, in place. Avg divides the sum by size().
  virtual Work all_reduce(Tensor t, ReduceOp op) = 0;
  // out = block rank() of op over the members' in: in.numel() == size() * out.numel().
  virtual Work reduce_scatter(Tensor in, Tensor out, ReduceOp op) = 0;
  // out = the members' in concatenated in group-rank order: out.numel() == size() * in.numel().
  virtual Work all_gather(Tensor in, Tensor out) = 0;
  // t = root's t (root is a group rank).
  virtual Work broadcast(Tensor t, int root) = 0;
  // Point-to-point with a group rank; a send matches the recv with the same (peer, tag) pair,
  // in issue order.
  virtual Work send(Tensor t, int peer, int tag = 0) = 0;
  virtual Work recv(Tensor t, int peer, int tag = 0) = 0;
  virtual Work barrier() = 0;

 protected:
  Communicator(std::string name, std::vector<int> world_ranks, int rank, double timeout_s)
      : name_(std::move(name)),
        world_ranks_(std::move(world_ranks)),
        rank_(rank),
        timeout_s_(timeout_s) {}

 private:
  std::string name_;
  std::vector<int> world_ranks_;
  int rank_ = 0;
  double timeout_s_ = 0;
};

}  // namespace braid
