// MpiCommunicator: the host-memory Communicator over MPI, progressed by its own thread.
// Internal to parallel/ (it names MPI); everything else sees only Communicator.
#pragma once

#include <mpi.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "parallel/communicator.h"

namespace braid {

// Ends the job with a message; never returns (World's prints and calls MPI_Abort).
using FatalHandler = std::function<void(const std::string& message)>;

// The user-defined reductions for 16-bit floats (sum and max in f32 arithmetic), created once
// after MPI_Init and freed before MPI_Finalize by World.
struct MpiReduceOps {
  MPI_Op bf16_sum = MPI_OP_NULL;
  MPI_Op bf16_max = MPI_OP_NULL;
  MPI_Op f16_sum = MPI_OP_NULL;
  MPI_Op f16_max = MPI_OP_NULL;
  void create();
  void free();
};

// "MPI_ERR_...: text" for an MPI return code.
std::string mpi_error_string(int rc);

class MpiCommunicator final : public Communicator {
 public:
  // Takes ownership of comm (freed in the destructor). world_rank names this process in
  // messages. The progress thread sleeps poll_sleep_us between tests while nobody waits.
  MpiCommunicator(MPI_Comm comm, std::string name, std::vector<int> world_ranks, int world_rank,
                  double timeout_s, const MpiReduceOps* ops, FatalHandler fatal,
                  int poll_sleep_us = 20);
  // Finishes every operation already issued (bounded by the timeout), then frees the comm.
  ~MpiCommunicator() override;

  Work all_reduce(Tensor t, ReduceOp op) override;
  Work reduce_scatter(Tensor in, Tensor out, ReduceOp op) override;
  Work all_gather(Tensor in, Tensor out) override;
  Work broadcast(Tensor t, int root) override;
  Work send(Tensor t, int peer, int tag = 0) override;
  Work recv(Tensor t, int peer, int tag = 0) override;
  Work barrier() override;

 private:
  struct Op {
    std::string what;   // "all_reduce(sum, bf16[1000])"
    std::string peers;  // "world ranks 0, 2" or "world rank 3"
    std::function<int(MPI_Request*)> start;
    std::function<void()> finish;  // after completion (Avg scaling); may be empty
    std::vector<Tensor> keep;      // storage kept alive until completion
    std::shared_ptr<detail::WorkState> state;
    MPI_Request req = MPI_REQUEST_NULL;
    int report_slot = -1;  // inflight_report slot while started
    std::chrono::steady_clock::time_point started;
  };
  Work enqueue(Op op);
  void progress_loop();
  void complete(Op& op, std::string error);
  std::string collective_peers() const;
  void check_tensor(const Tensor& t, const char* op, const char* arg) const;
  MPI_Datatype mpi_type(DType t) const;
  MPI_Op mpi_op(ReduceOp op, DType t) const;
  std::function<void()> avg_finisher(ReduceOp op, Tensor t) const;

  MPI_Comm comm_;
  int world_rank_;
  const MpiReduceOps* ops_;
  FatalHandler fatal_;
  int poll_sleep_us_;
  std::atomic<int> waiters_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Op> queue_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace braid
