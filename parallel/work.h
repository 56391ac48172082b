// Work: the handle of one asynchronous communication operation (done, wait, error).
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>

namespace braid {

namespace detail {
// Shared between the caller's Work handles and the backend that completes the operation.
struct WorkState {
  std::mutex mu;
  std::condition_variable cv;
  std::atomic<bool> finished{false};
  std::string error;  // set before `finished`; empty on success
  // The backend's count of callers blocked in wait(); it polls harder while one waits.
  std::atomic<int>* waiters = nullptr;

  // Called once by the backend.
  void finish(std::string err);
};
}  // namespace detail

class Work {
 public:
  Work() = default;  // an empty handle, already done
  explicit Work(std::shared_ptr<detail::WorkState> s) : state_(std::move(s)) {}
  // A handle that is already finished (size-1 groups, empty operations).
  static Work completed();

  // True once the operation has finished, successfully or not. Never blocks.
  bool done() const;
  // Blocks until the operation has finished; throws braid::Error with the backend's message
  // (operation, group, rank) if it failed. An operation that never finishes does not block
  // forever: the backend ends the job at the communicator's timeout.
  void wait() const;
  // The failure message once done(); empty while running or on success.
  std::string error() const;

 private:
  std::shared_ptr<detail::WorkState> state_;
};

}  // namespace braid
