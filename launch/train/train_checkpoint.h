// The trainer's checkpoints: what the manifest records, who writes which files in each
// layout, the LoRA adapter files beside them, and the step hook that saves (and stops).
#pragma once

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "launch/io/checkpoint.h"
#include "launch/train/rank_model.h"
#include "launch/report/run_record.h"
#include "launch/config/train_config.h"
#include "launch/train/train_hooks.h"
#include "optim/optimizer.h"
#include "parallel/communicator.h"

namespace braid {

// The manifest's `state`: everything besides the tensors that a resume needs.
nlohmann::json checkpoint_state(const RunConfig& cfg, int64_t done, const Optimizer& opt,
                                const ParallelLayout& layout);

// Writes checkpoint `step`; collective over `world`. With tp = pp = 1 and unsharded state rank 0
// (`lead`) alone writes model.safetensors and optimizer.safetensors. Otherwise every rank
// takes part: with ZeRO-1 (opt.sharded()) DP rank 0 of every (tp, pp) shard writes its weights
// (with 16 bits the masters gathered over DP first) and every rank its own pieces of the
// moments (optimizer-dpR.safetensors with tp = pp = 1, else optimizer-tpT-ppS-dpR.safetensors,
// each piece with its tensor-parallel record); without it DP rank 0 of every (tp, pp) shard
// writes that shard's files. All write into the staging directory rank 0 made; rank 0 commits
// (manifest last) once all have written, so a rank dying part-way leaves the previous
// checkpoint as it was. Returns the checkpoint's directory.
std::string write_checkpoint(CheckpointManager& ckpt, int64_t step, const RankModel& model,
                             Optimizer& opt, const nlohmann::json& manifest_state,
                             Communicator& world, bool lead, int dp_rank);

// The PEFT adapter files of a LoRA run. Under tensor or pipeline parallelism the adapters are
// spread over the ranks: they are read back whole from the checkpoint just committed, into a
// whole model with the same LoRA wrapping, and written from there.
void save_lora_adapter(ExecContext& ctx, const RunConfig& cfg, Transformer* whole,
                       const std::string& checkpoint, const std::filesystem::path& dir);

// Saves a checkpoint when checkpoint_due says so (every checkpoint.interval steps, every
// checkpoint.interval_minutes, at the end, on a stop signal), the ranks first agreeing (max)
// on whether it is due and on a signal, since their clocks and signals differ; then the LoRA
// adapter files. On a signal it ends the run after the checkpoint (StepInfo::stop) and writes
// summary.stopped_by. Collective over the world.
class CheckpointHook final : public TrainHook {
 public:
  CheckpointHook(TrainRun& run, TrainSummary& summary);
  void on_step_end(StepInfo& s) override;
  // The newest checkpoint this run can go back to ("" when none yet).
  const std::string& last() const { return last_; }

 private:
  TrainRun& run_;
  TrainSummary& summary_;
  std::string last_;
  std::chrono::steady_clock::time_point last_time_;
};

}  // namespace braid
