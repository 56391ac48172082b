// Work: the handle of one asynchronous communication operation (done, wait, error).
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
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
  // Event-backed completion (device backends): no host thread calls finish(); instead done()
  // asks poll(false) and wait() calls poll(true), which returns only once the operation is
  // complete (or ends the job / throws at the backend's timeout). poll returns true when the
  // operation is complete; the first true finishes the state.
  std::function<bool(bool block)> poll;
  // The device event the operation completes on (nullptr for host-completed work), and what
  // must live as long as the handle (the event's owner, the operation's tensors).
  void* device_event = nullptr;
  std::shared_ptr<void> keep;

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
  // A handle completed by polling (see detail::WorkState::poll), e.g. on a CUDA event.
  static Work polled(std::function<bool(bool block)> poll);

  // True once the operation has finished, successfully or not. Never blocks.
  bool done() const;
  // Blocks until the operation has finished; throws braid::Error with the backend's message
  // (operation, group, rank) if it failed. An operation that never finishes does not block
  // forever: the backend ends the job at the communicator's timeout.
  void wait() const;
  // The failure message once done(); empty while running or on success.
  std::string error() const;
  // The device event an event-backed operation completes on; nullptr otherwise.
  void* device_event() const { return state_ ? state_->device_event : nullptr; }
  // Records the device event and what must live as long as the handle (backends only).
  void attach(void* event, std::shared_ptr<void> keep);

 private:
  std::shared_ptr<detail::WorkState> state_;
};

}  // namespace braid
