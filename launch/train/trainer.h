// Trainer: the training loop of one rank in any layout (data -> model -> data-parallel
// reduction -> optimizer), with its step hooks: metrics, evaluation, checkpoints, the timeline
// and the sample at the end.
#pragma once

#include <string>

#include "launch/config/train_config.h"

namespace braid {

struct TrainSummary {
  int64_t steps_done = 0;       // optimizer steps run by this invocation
  int64_t final_step = 0;       // global step reached
  double last_train_loss = 0;   // mean loss of the last step
  double last_val_loss = -1;    // -1 when never evaluated
  std::string run_dir;
  std::string stopped_by;       // "SIGTERM"/"SIGINT" when a signal ended the run early, else ""
};

struct DistRun;

// Runs training as configured. config_path names the YAML file (for messages and relative
// paths); cfg is already resolved and validated. dist: this rank's place in the job
// (launch/train/dist_run.h; self groups for one process).
TrainSummary train(const RunConfig& cfg, const std::string& config_path, const DistRun& dist);

}  // namespace braid
