// A time simulator for pipeline schedules: each stage runs its row in order, a receive waits
// for the matching send; gives per-stage idle time and peak stashed micro-batches.
#pragma once

#include <vector>

#include "parallel/pipeline_schedule.h"

namespace braid {

// Durations in arbitrary units. `backward` is a whole backward (1f1b, gpipe, interleaved);
// zb-h1 splits it into `backward_input` + `weight`. The defaults, F = 1, B = 2 = 1 + 1,
// make every schedule do the same work per micro-batch.
struct StageCosts {
  double forward = 1.0;
  double backward = 2.0;
  double backward_input = 1.0;
  double weight = 1.0;
  double p2p = 0.0;  // a send's duration; its data is available when it ends
};

struct TimedAction {
  Action action;
  double start = 0;
  double end = 0;
};

struct StageResult {
  std::vector<TimedAction> timeline;  // the row's actions with their times
  double busy = 0;                    // compute time (F, B, W)
  double end = 0;                     // when the stage's last action ends
  double idle_fraction = 0;           // (makespan - busy) / makespan
  int peak_in_flight = 0;             // most (mb, chunk) pairs forwarded but not yet backwarded (B)
  int peak_stashed = 0;  // most pairs forwarded whose last backward piece (B, or W) is not done
};

struct SimResult {
  std::vector<StageResult> stages;
  double makespan = 0;  // time from 0 to the last action of any stage
  double mean_idle_fraction() const;
};

// Throws braid::Error naming the stage and action when the table is inconsistent: a compute
// action whose inputs are not available on its stage (a missing or later receive, a B before
// its F, a W before its B), an action run twice or missing, a receive with no matching send,
// or a deadlock (every unfinished stage waiting on a receive).
SimResult simulate_pipeline(const PipelineSchedule& ps, const StageCosts& costs = {});

}  // namespace braid
