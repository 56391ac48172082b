// Chrome trace JSON (the format Perfetto and chrome://tracing open): one timeline per rank.
#pragma once

#include <string>
#include <vector>

#include "parallel/pipeline_sim.h"

namespace braid {

// A complete event ("ph": "X"). pid is the rank (a process row), tid a lane within it.
struct TraceEvent {
  std::string name;
  std::string category;
  double ts_us = 0;   // start, microseconds
  double dur_us = 0;  // duration, microseconds
  int pid = 0;
  int tid = 0;
};

// {"traceEvents": [...], "displayTimeUnit": "ms"} with a process_name metadata event
// ("rank N") for every pid seen, events sorted by (pid, ts).
std::string chrome_trace_json(std::vector<TraceEvent> events);
// Writes the JSON atomically (temp file + rename); throws braid::UserError naming the path.
void write_chrome_trace(const std::string& path, std::vector<TraceEvent> events);

// The simulated timeline as events: stage s as pid s, one unit of time as `us_per_unit`
// microseconds, compute on tid 0 and sends/receives on tid 1 (zero-length ones dropped).
std::vector<TraceEvent> trace_events(const SimResult& sim, double us_per_unit = 1000.0);

}  // namespace braid
