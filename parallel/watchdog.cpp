// Watchdog thread.
#include "parallel/watchdog.h"

#include <chrono>

namespace braid {

Watchdog::Watchdog(double timeout_s, std::string message,
                   std::function<void(const std::string&)> on_expire) {
  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                      std::chrono::duration<double>(timeout_s));
  thread_ =
      std::thread([this, deadline, message = std::move(message), on_expire = std::move(on_expire)] {
        std::unique_lock<std::mutex> lock(mu_);
        if (!cv_.wait_until(lock, deadline, [&] { return disarmed_; })) on_expire(message);
      });
}

Watchdog::~Watchdog() {
  disarm();
  thread_.join();
}

void Watchdog::disarm() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    disarmed_ = true;
  }
  cv_.notify_all();
}

}  // namespace braid
