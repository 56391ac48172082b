// metrics.jsonl -> curves: one pass, keyed by event ("train", "eval", and the lifecycle ones).
#include "launch/report/run_metrics.h"

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace braid {

namespace {

// The keys of "train" records drawn as curves (MFU in percent, as people read it).
constexpr std::pair<const char*, double> kTrainCurves[] = {
    {"loss", 1.0},  {"lr", 1.0},     {"grad_norm", 1.0},       {"tokens_per_s", 1.0},
    {"mfu", 100.0}, {"step_s", 1.0}, {"peak_tensor_mib", 1.0}, {"peak_rss_mib", 1.0},
};

void add_point(RunMetrics& r, const std::string& key, const nlohmann::json& j, double step,
               double scale) {
  if (!j.contains(key) || !j[key].is_number()) return;
  const double v = j[key].get<double>() * scale;
  if (std::isfinite(v)) r.series[key].emplace_back(step, v);
}

}  // namespace

RunMetrics read_metrics_jsonl(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) user_error("cannot open {}; give a run directory written by `braid train`", path);
  RunMetrics r;
  std::string line;
  int lineno = 0;
  int64_t prev_step = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty()) continue;
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) {  // a line cut short by a kill, or foreign text: skipped, counted
      if (r.bad_lines.empty())
        r.bad_lines = std::to_string(lineno);
      else
        r.bad_lines += ", " + std::to_string(lineno);
      continue;
    }
    ++r.records;
    const int64_t step =
        j.contains("step") && j["step"].is_number_integer() ? j["step"].get<int64_t>() : 0;
    // Records from before metrics had events: a window when it has step_s, else an eval.
    const std::string ev = j.contains("event") && j["event"].is_string()
                               ? j["event"].get<std::string>()
                               : (j.contains("step_s")     ? "train"
                                  : j.contains("val_loss") ? "eval"
                                                           : "");
    r.last_step = std::max(r.last_step, step);
    if (ev == "train") {
      for (const auto& [key, scale] : kTrainCurves)
        add_point(r, key, j, static_cast<double>(step), scale);
      const int64_t steps = step - prev_step;
      prev_step = step;
      if (steps > 0 && j.contains("kernel_s") && j["kernel_s"].is_object()) {
        for (const auto& [g, v] : j["kernel_s"].items())
          if (v.is_number()) r.kernel_seconds[g] += v.get<double>() * static_cast<double>(steps);
        r.kernel_steps += steps;
      }
      if (j.contains("memory_mib") && j["memory_mib"].is_object()) {
        r.memory_mib.clear();
        for (const auto& [k, v] : j["memory_mib"].items())
          if (v.is_number()) r.memory_mib[k] = v.get<double>();
      }
    } else if (ev == "eval") {
      add_point(r, "val_loss", j, static_cast<double>(step), 1.0);
    } else if (!ev.empty()) {
      if (ev == "start" || ev == "resume") prev_step = step;
      r.events.emplace_back(ev, step);
    }
  }
  return r;
}

bool stopped_by_signal(const RunMetrics& m) {
  bool stopped = false;
  for (const auto& [ev, step] : m.events) {
    if (ev == "start" || ev == "resume") stopped = false;
    if (ev == "stop") stopped = true;
  }
  return stopped;
}

}  // namespace braid
