// CheckpointConfig: when checkpoints are written, how many are kept, and resuming.
#pragma once

#include <string>

#include "core/config_fields.h"

namespace braid {

struct CheckpointConfig {
  int interval = 1000;
  double interval_minutes = 30.0;
  int keep_last = 3;
  std::string resume = "auto";

  template <class V>
  void visit(V& v) {
    v("interval", interval, "Write a checkpoint every this many steps (and at the end, and when stopped by SIGTERM/SIGINT); 0: no step-based checkpoints.");
    v("interval_minutes", interval_minutes, "Also write one when this many minutes of training have passed since the last (a bound on the work a kill -9 or a crash loses); 0 disables.");
    v("keep_last", keep_last, "Keep the newest N checkpoints; older ones are deleted after a new one is complete.");
    v("resume", resume, "auto: continue from the run directory's `latest` checkpoint if there is one; none: start fresh (refuses to overwrite an existing run's checkpoints); or a checkpoint directory path.");
  }
  void validate() const {
    if (interval < 0) config_error("interval", "interval is {}; expected >= 0", interval);
    if (!(interval_minutes >= 0)) config_error("interval_minutes", "interval_minutes is {}; expected >= 0", interval_minutes);
    if (keep_last < 1) config_error("keep_last", "keep_last is {}; expected >= 1", keep_last);
    if (resume.empty()) config_error("resume", "resume is empty; expected auto, none or a checkpoint path");
  }
};

}  // namespace braid
