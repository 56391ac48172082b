// braid train's default pipeline split (parallel.pp_split empty): blocks per virtual stage,
// counting the LM head (with the final norm and the cross-entropy) on the last virtual stage.
// Pure arithmetic, shared by the trainer (which runs the split) and the planner (which models
// braid runs with it).
#pragma once

#include <vector>

#include "core/model_config.h"
#include "launch/plan/plan_types.h"

namespace braid::plan {

// n blocks of cost `block` each over k >= 1 stages (1 <= k <= n), stage 0 carrying `first`
// more and stage k-1 `last` more (k = 1: both): a partition minimising the most expensive
// stage, and among those the most even one (smallest sum of squared stage costs; the earliest
// stages take more blocks among equals). With a head cheaper than a block that is the even
// split, the remainder on the earliest stages.
std::vector<int> min_max_stage_blocks(int n, int k, double block, double first, double last);

// Blocks of each of `num_virtual` virtual stages for model m trained with t (the block's and
// the head's forward + backward FLOPs per token at t.seq, recomputation included; the token
// embedding is a lookup and costs nothing here).
std::vector<int> balanced_stage_blocks(const ModelConfig& m, const TrainOptions& t,
                                       int num_virtual);

}  // namespace braid::plan
