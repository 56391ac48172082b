// Watchdog: runs a fatal action if a phase (start-up, a blocking MPI call) outlives its deadline.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace braid {

class Watchdog {
 public:
  // After timeout_s seconds without disarm(), calls on_expire(message) from its own thread
  // (on_expire is expected to end the process, e.g. print and MPI_Abort).
  Watchdog(double timeout_s, std::string message,
           std::function<void(const std::string&)> on_expire);
  ~Watchdog();  // disarms
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  void disarm();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool disarmed_ = false;
  std::thread thread_;
};

}  // namespace braid
