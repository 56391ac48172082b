// What `braid plan --config` takes from a braid run config: the model and the training shape.
#pragma once

#include <string>
#include <vector>

#include "launch/plan/plan_types.h"
#include "launch/train_config.h"

namespace braid::plan {

struct ConfigPlanInput {
  ModelConfig model;
  TrainOptions train;  // the step `braid train` runs on one process: fp32, AdamW, no recompute
};

// Maps a loaded RunConfig onto planner inputs: data.micro_batch, data.seq_len, and
// global batch = micro_batch x grad_accum (one rank); fp32 compute and gradients, AdamW,
// flash-style attention (nothing T x T is stored), no dropout, no checkpointing.
ConfigPlanInput plan_input_from_run_config(const RunConfig& cfg);

// load_run_config(path, overrides) followed by plan_input_from_run_config. Errors are the
// loader's UserErrors (they name the file, line or override, and the key).
ConfigPlanInput load_plan_config(const std::string& path, const std::vector<std::string>& overrides);

}  // namespace braid::plan
