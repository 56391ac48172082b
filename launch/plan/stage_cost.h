// The planner's cost model of a pipeline split: a block's and the LM head's forward + backward
// FLOPs per token for a training step, handed to the split itself (parallel/stage_split.h).
#pragma once

#include <vector>

#include "core/model_config.h"
#include "launch/plan/plan_types.h"
#include "parallel/stage_split.h"

namespace braid::plan {

// The costs of model m's pieces trained with t: the block's FLOPs per token at t.seq
// (recomputation included), the head's (with the final norm and the cross-entropy) on the last
// stage; the token embedding is a lookup and costs nothing here.
SplitCosts stage_costs(const ModelConfig& m, const TrainOptions& t);

// Blocks of each of `num_virtual` virtual stages for model m trained with t, balanced by
// stage_costs.
std::vector<int> balanced_stage_blocks(const ModelConfig& m, const TrainOptions& t,
                                       int num_virtual);

}  // namespace braid::plan
