// Chrome trace JSON writer.
#include "parallel/chrome_trace.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "core/atomic_file.h"

namespace braid {

std::string chrome_trace_json(std::vector<TraceEvent> events) {
  std::stable_sort(events.begin(), events.end(), [](const TraceEvent& a, const TraceEvent& b) {
    return a.pid != b.pid ? a.pid < b.pid : a.ts_us < b.ts_us;
  });
  nlohmann::json out = nlohmann::json::array();
  std::set<int> pids;
  for (const TraceEvent& e : events) pids.insert(e.pid);
  for (int pid : pids)
    out.push_back({{"name", "process_name"},
                   {"ph", "M"},
                   {"pid", pid},
                   {"tid", 0},
                   {"args", {{"name", fmt::format("rank {}", pid)}}}});
  for (const TraceEvent& e : events)
    out.push_back({{"name", e.name},
                   {"cat", e.category},
                   {"ph", "X"},
                   {"ts", e.ts_us},
                   {"dur", e.dur_us},
                   {"pid", e.pid},
                   {"tid", e.tid}});
  nlohmann::json doc = {{"traceEvents", out}, {"displayTimeUnit", "ms"}};
  return doc.dump(1);
}

void write_chrome_trace(const std::string& path, std::vector<TraceEvent> events) {
  write_file_atomic(path, chrome_trace_json(std::move(events)));
}

std::vector<TraceEvent> trace_events(const SimResult& sim, double us_per_unit) {
  std::vector<TraceEvent> out;
  for (size_t s = 0; s < sim.stages.size(); ++s) {
    for (const TimedAction& t : sim.stages[s].timeline) {
      bool compute = is_compute(t.action.type);
      double dur = (t.end - t.start) * us_per_unit;
      if (!compute && dur <= 0) continue;
      TraceEvent e;
      e.name = fmt::format("{}{}", action_type_name(t.action.type), t.action.mb);
      if (t.action.chunk > 0) e.name += fmt::format(".{}", t.action.chunk);
      e.category = compute ? "compute" : "p2p";
      e.ts_us = t.start * us_per_unit;
      e.dur_us = dur;
      e.pid = static_cast<int>(s);
      e.tid = compute ? 0 : 1;
      out.push_back(std::move(e));
    }
  }
  return out;
}

}  // namespace braid
