// --layout auto: the fastest layouts that fit.
#pragma once

#include <string>
#include <vector>

#include "core/model_config.h"
#include "launch/plan/plan_types.h"

namespace braid::plan {

struct RankedPlan {
  PlanResult plan;
  std::string reason;  // why it wins, or what it loses on against the best
};

struct SearchResult {
  std::vector<RankedPlan> best;  // fastest first, at most `keep`
  int tried = 0, rejected_memory = 0,
      rejected_invalid = 0;  // invalid: a schedule the layout cannot run
};

// Searches tp (divisors of GPUs per node that divide the heads), pp, virtual stages,
// micro-batch, checkpointing and ZeRO; dp fills the rest of the cluster. Only layouts that fit
// in memory are ranked. `t` supplies everything else (global batch, precision, LoRA...).
SearchResult search_layouts(const ModelConfig& m, const TrainOptions& t, const Cluster& c,
                            int keep = 5);

}  // namespace braid::plan
