// braid run config -> planner inputs (the model and the one-rank training step).
#include "launch/plan/config_input.h"

#include "launch/config.h"

namespace braid::plan {

ConfigPlanInput plan_input_from_run_config(const RunConfig& cfg) {
  ConfigPlanInput in;
  in.model = cfg.model;
  TrainOptions& t = in.train;
  t.micro_batch = cfg.data.micro_batch;
  t.seq = cfg.data.seq_len;
  t.global_batch = static_cast<int64_t>(cfg.data.micro_batch) * cfg.data.grad_accum;
  // The CPU trainer computes, accumulates and updates everything in fp32.
  t.precision = "fp32";
  t.grad_precision = "fp32";
  t.optimizer = cfg.optim.name;
  t.zero = 0;
  t.checkpointing = Checkpointing::None;
  t.flash_attention = true;  // attention_forward keeps only the log-sum-exp per row
  t.dropout = 0;             // braid's models have no dropout
  t.sequence_parallel = false;
  return in;
}

ConfigPlanInput load_plan_config(const std::string& path, const std::vector<std::string>& overrides) {
  return plan_input_from_run_config(load_run_config(path, overrides));
}

}  // namespace braid::plan
