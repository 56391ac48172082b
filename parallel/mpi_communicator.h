// MpiCommunicator: the host-memory Communicator over MPI, progressed by its own thread.
// Internal to parallel/ (it names MPI); everything else sees only Communicator.
#pragma once

#include <mpi.h>

#include <atomic>
#include <chrono>
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

// How the progress thread drives MPI.
struct MpiProgress {
  // Collectives run as blocking MPI calls on the progress thread (tuned algorithms, progress
  // all the time they run), with a monitor thread for the timeout; false: non-blocking calls
  // tested in a loop like send/recv.
  bool blocking_collectives = true;
  // Sleep between tests of pending non-blocking operations while no caller waits (0: spin).
  int poll_sleep_us = 20;
};

class MpiCommunicator final : public Communicator {
 public:
  // Takes ownership of comm (freed in the destructor). world_rank names this process in
  // messages.
  MpiCommunicator(MPI_Comm comm, std::string name, std::vector<int> world_ranks, int world_rank,
                  double timeout_s, const MpiReduceOps* ops, FatalHandler fatal,
                  const MpiProgress& progress = {});
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
    int report_slot = -1;     // inflight_report slot while started
    bool collective = false;  // may run as a blocking call (see MpiProgress)
    std::chrono::steady_clock::time_point started;
  };
  Work enqueue(Op op);
  void progress_loop();
  void run_blocking(Op& op);
  void monitor_loop();
  std::string timeout_message(const Op& op) const;
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
  MpiProgress progress_;
  std::atomic<int> waiters_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Op> queue_;
  bool stop_ = false;
  std::thread thread_;
  // The blocking collective in progress, watched by monitor_ for the timeout.
  std::mutex monitor_mu_;
  std::condition_variable monitor_cv_;
  bool monitor_stop_ = false;
  bool blocking_ = false;
  std::chrono::steady_clock::time_point blocking_since_;
  std::string blocking_message_;
  std::thread monitor_;
};

}  // namespace braid
