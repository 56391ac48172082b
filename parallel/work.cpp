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

Work Work::polled(std::function<bool(bool block)> poll) {
  auto s = std::make_shared<detail::WorkState>();
  s->poll = std::move(poll);
  return Work(std::move(s));
}

namespace {
// Asks an event-backed state whether it is complete; finishes it on the first yes.
bool poll_state(detail::WorkState& s, bool block) {
  if (s.finished.load(std::memory_order_acquire)) return true;
  if (!s.poll || !s.poll(block)) return false;
  s.finish({});
  return true;
}
}  // namespace

bool Work::done() const {
  if (!state_) return true;
  if (state_->poll) return poll_state(*state_, false);
  return state_->finished.load(std::memory_order_acquire);
}

void Work::wait() const {
  if (!state_) return;
  if (state_->poll) poll_state(*state_, true);
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

void Work::attach(void* event, std::shared_ptr<void> keep) {
  if (!state_) state_ = std::make_shared<detail::WorkState>();
  state_->device_event = event;
  state_->keep = std::move(keep);
}

std::string Work::error() const {
  if (!state_ || !state_->finished.load(std::memory_order_acquire)) return {};
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->error;
}

}  // namespace braid
