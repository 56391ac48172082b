// The planner's costs of a pipeline split's pieces (FLOPs per token).
#include "launch/plan/stage_cost.h"

#include "launch/plan/model_math.h"

namespace braid::plan {

SplitCosts stage_costs(const ModelConfig& m, const TrainOptions& t) {
  const int64_t s = t.seq > 0 ? t.seq : m.context_length;
  return {block_hw_flops_per_token(m, t, s), 0.0, head_flops_per_token(m, t)};
}

std::vector<int> balanced_stage_blocks(const ModelConfig& m, const TrainOptions& t,
                                       int num_virtual) {
  return min_max_stage_blocks(m.n_layer, num_virtual, stage_costs(m, t));
}

}  // namespace braid::plan
