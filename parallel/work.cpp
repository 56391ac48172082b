// Work handle.
#include "parallel/work.h"

#include "core/error.h"

namespace braid {

void detail::WorkState::finish(std::string err) {
  {
    std::lock_guard<std::mutex> lock(mu);
    error = std::move(err);
    finished.store(true, std::memory_order_release);
  }
  cv.notify_all();
}

Work Work::completed() {
  auto s = std::make_shared<detail::WorkState>();
  s->finished.store(true);
  return Work(std::move(s));
}

bool Work::done() const { return !state_ || state_->finished.load(std::memory_order_acquire); }

void Work::wait() const {
  if (!state_) return;
  if (!state_->finished.load(std::memory_order_acquire)) {
    if (state_->waiters) state_->waiters->fetch_add(1);
    {
      std::unique_lock<std::mutex> lock(state_->mu);
      state_->cv.wait(lock, [&] { return state_->finished.load(std::memory_order_acquire); });
    }
    if (state_->waiters) state_->waiters->fetch_sub(1);
  }
  std::lock_guard<std::mutex> lock(state_->mu);
  if (!state_->error.empty()) throw Error(state_->error);
}

std::string Work::error() const {
  if (!state_ || !state_->finished.load(std::memory_order_acquire)) return {};
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->error;
}

}  // namespace braid
