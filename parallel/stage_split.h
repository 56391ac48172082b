// The pipeline split: how many consecutive blocks each (virtual) stage holds. Pure arithmetic
// over costs the caller supplies, so parallel/ holds no cost formulas: the trainer passes the
// model's FLOPs (launch/train/rank_model.cpp), the planner its own cost model
// (launch/plan/stage_cost.h).
#pragma once

#include <vector>

namespace braid {

// What a split distributes, in any one unit (FLOPs, seconds): blocks of equal cost `block`
// (> 0), and work fixed to the ends of the pipeline: `first` more on stage 0 (the embedding),
// `last` more on the last stage (the final norm, the LM head and the loss).
struct SplitCosts {
  double block = 1.0;
  double first = 0.0;
  double last = 0.0;
};

// n blocks over k >= 1 stages (1 <= k <= n; k = 1 carries both ends): a partition minimising
// the most expensive stage, and among those the most even one (smallest sum of squared stage
// costs; the earliest stages take more blocks among equals). With an end cheaper than a block
// that is the even split, the remainder on the earliest stages.
std::vector<int> min_max_stage_blocks(int n, int k, const SplitCosts& costs);

}  // namespace braid
