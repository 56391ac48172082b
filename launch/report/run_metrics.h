// A run's metrics.jsonl read back as curves and totals, for `braid report`.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace braid {

using Series = std::vector<std::pair<double, double>>;  // (step, value), finite values only

struct RunMetrics {
  std::map<std::string, Series> series;  // by metrics.jsonl key: loss, val_loss, lr, ...
  // Seconds per kernel group summed over every logged window (per-step seconds x steps).
  std::map<std::string, double> kernel_seconds;
  int64_t kernel_steps = 0;
  std::map<std::string, double> memory_mib;             // the last window's memory by category
  std::vector<std::pair<std::string, int64_t>> events;  // (event, step) of start/resume/stop/...
  int64_t last_step = 0;
  int records = 0;
  std::string bad_lines;  // line numbers that were not JSON objects ("4, 9"), skipped
};

// Reads `path`; throws braid::UserError when it cannot be opened. Lines that are not JSON
// objects (the last one cut short by a kill -9) are skipped and listed in bad_lines; values
// that are not finite numbers (null in JSON) are left out of their curve.
RunMetrics read_metrics_jsonl(const std::string& path);

// True when the run's last attempt ended on a signal: a "stop" event comes after the last
// "start" or "resume" (braid exits 0 both then and when training is done; a launcher that
// should retry tells them apart with this).
bool stopped_by_signal(const RunMetrics& m);

}  // namespace braid
