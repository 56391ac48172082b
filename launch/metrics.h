// Training metrics: one log line per interval, a progress bar on terminals, metrics.jsonl.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

namespace braid {

class MetricsLog {
 public:
  // Appends to <run_dir>/metrics.jsonl (created if missing).
  MetricsLog(const std::string& run_dir, int64_t total_steps);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  // Writes one JSON object as a line (flushed, so a killed run keeps what it logged).
  void record(const nlohmann::json& j);
  // Prints a human line (clearing the progress bar first on a terminal).
  void print(const std::string& line);
  // Redraws the progress bar (terminals only).
  void progress(int64_t step, double loss);

 private:
  std::FILE* file_ = nullptr;
  int64_t total_steps_;
  bool tty_;
  bool bar_shown_ = false;
};

// "1h02m", "3m05s", "12s"
std::string format_duration(double seconds);
// "1.23 G", "512 M" style with the given unit
std::string format_si(double v, const char* unit);

}  // namespace braid
