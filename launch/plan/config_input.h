// What `braid plan --config` takes from a braid run config: the model, the training shape and
// the rank layout; and what --compare takes from a run directory's run.json.
#pragma once

#include <string>
#include <vector>

#include "launch/plan/plan_types.h"
#include "launch/config/train_config.h"

namespace braid::plan {

struct ConfigPlanInput {
  ModelConfig model;
  TrainOptions train;  // the step `braid train` runs: fp32, AdamW, no recompute
  // parallel.dp (1 when auto), tp, pp, the schedule (interleaved-1f1b as "interleaved" with
  // parallel.virtual_stages). `schedule_error` is set when the planner cannot model the
  // config's schedule (zb-h1); the layout then says 1f1b.
  Layout layout;
  bool dp_auto = true;  // parallel.dp was auto (the layout says 1)
  std::string schedule_error;
};

// Maps a loaded RunConfig onto planner inputs: data.micro_batch, data.seq_len, and global
// batch = micro_batch x grad_accum x dp (grad_accum is the micro-batches per pipeline per
// step); fp32 compute and gradients, AdamW, flash-style attention (nothing T x T is stored), no
// dropout, no checkpointing, no sequence parallelism.
ConfigPlanInput plan_input_from_run_config(const RunConfig& cfg);

// Blocks of each of num_virtual virtual stages as braid train splits them: parallel.pp_split
// when given, else balanced_stage_blocks for the config's training step t. Empty for one
// stage, or fewer blocks than stages (the trainer refuses that layout).
std::vector<int> braid_virtual_stage_blocks(const RunConfig& cfg, const TrainOptions& t,
                                            int num_virtual);

// load_run_config(path, overrides) followed by plan_input_from_run_config. Errors are the
// loader's UserErrors (they name the file, line or override, and the key).
ConfigPlanInput load_plan_config(const std::string& path,
                                 const std::vector<std::string>& overrides);

// The layout a run actually ran on: the last attempt in <run_dir>/run.json ("parallel_layout"
// and "threads", the OpenMP threads of each rank).
struct RunLayout {
  std::string path;
  int ranks = 1, dp = 1, tp = 1, pp = 1, zero = 0;
  int threads = 0;  // 0: not recorded
  // What rank 0 computed on: "cpu" or "cuda" (run.json's devices; runs recorded before it
  // had them ran on the CPU), and the record's words for it ("cuda:0, NVIDIA H200 (...)").
  std::string device = "cpu";
  std::string device_detail;
};
// Throws UserError naming the file when it is missing, unreadable or has no layout.
RunLayout read_run_layout(const std::string& run_dir);

// Sets dp, tp, pp and the ZeRO stage of `in` to the run's (the global batch follows dp).
void apply_run_layout(ConfigPlanInput& in, const RunLayout& run);

}  // namespace braid::plan
