// Training metrics: one log line per interval, a progress bar on terminals, metrics.jsonl and
// TensorBoard event files beside it.
#pragma once

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

namespace braid {

class TfEventsWriter;

class MetricsLog {
 public:
  // Appends to <run_dir>/metrics.jsonl (created if missing) and starts a new tfevents file in
  // run_dir. Records of an earlier attempt with "step" > resume_step (logged after the
  // checkpoint this run resumes from, or by a run that died before its first checkpoint) are
  // moved to metrics.superseded.jsonl first, so the file holds one curve.
  MetricsLog(const std::string& run_dir, int64_t total_steps, int64_t resume_step);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  // Writes `fields` plus "event" and "time" (Unix seconds) as one line, flushed, so a killed
  // run keeps what it logged. "train" and "eval" records also go to TensorBoard as scalars.
  void record(const std::string& event, nlohmann::json fields);
  // Prints a human line (clearing the progress bar first on a terminal).
  void print(const std::string& line);
  // Redraws the progress bar (terminals only).
  void progress(int64_t step, double loss);

  const std::string& tfevents_path() const;

 private:
  std::FILE* file_ = nullptr;
  std::unique_ptr<TfEventsWriter> tb_;
  int64_t total_steps_;
  bool tty_;
  bool bar_shown_ = false;
};

// Moves the records of `metrics_path` whose "step" exceeds `step` to `superseded_path`
// (appended) and rewrites metrics_path atomically without them. Lines that are not JSON
// objects with a step are kept. Returns how many records moved.
int supersede_metrics_after(const std::string& metrics_path, const std::string& superseded_path,
                            int64_t step);

// Seconds since the Unix epoch, with sub-second resolution.
double unix_time_now();

// "1h02m", "3m05s", "12s"
std::string format_duration(double seconds);
// "1.23 G", "512 M" style with the given unit
std::string format_si(double v, const char* unit);

}  // namespace braid
