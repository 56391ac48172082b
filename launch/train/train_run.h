// TrainRun: everything one rank of `braid train` trains with, built in this order and resumed:
// the data checks, the run directory (lock, logs, checkpoints), what to resume from, the
// execution context, this rank's part of the model, the data-parallel wrapper over its DP group,
// the optimizer (parallel/data_parallel.h, launch/train/train_optimizer.h), the resumed optimizer
// state and step, the run record, the header lines, metrics.jsonl and the data loader. The loop
// (launch/train/trainer.cpp) and its step hooks (launch/train/train_hooks.h) read it; they do not
// build.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/context.h"
#include "data/loader.h"
#include "launch/config/train_config.h"
#include "launch/io/checkpoint.h"
#include "launch/report/peak_cache.h"
#include "launch/report/run_record.h"
#include "launch/train/dist_run.h"
#include "launch/train/exec_setup.h"
#include "launch/train/rank_model.h"
#include "launch/train/run_lock.h"
#include "launch/train/signals.h"
#include "launch/train/train_log.h"
#include "launch/train/train_optimizer.h"
#include "optim/optimizer.h"
#include "parallel/data_parallel.h"

namespace braid {

class TrainRun {
 public:
  // cfg_in: resolved and validated (lora.init_from is resolved here). Prints the header lines
  // on the lead rank and starts metrics.jsonl there.
  TrainRun(const RunConfig& cfg_in, const std::string& config_path, const DistRun& dist);
  TrainRun(const TrainRun&) = delete;
  TrainRun& operator=(const TrainRun&) = delete;

  // The step's loss summed over the job: it lives on the last stage, the same on each of its
  // tensor-parallel ranks, so exactly one rank per DP replica adds its share. Collective.
  LossSum global_loss(LossSum mine) const;
  // The loss gradient scale of a step whose micro-batches (this rank's) are `micro`: 1 / the
  // trained targets (not -1) of the whole step over every data-parallel rank, so the loss is
  // the mean over trained tokens; grad_scale when the data has no loss mask (no collective).
  // Collective over the world when masked.
  float step_grad_scale(const std::vector<Batch>& micro) const;

  const std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  const RunConfig cfg;
  const std::string config_path;
  const DistRun& dist;
  const ParallelDims& dims;
  const std::filesystem::path run_dir, data_dir;
  const std::string train_path, val_path, tok_path;  // tok_path: "" when the data has none

  std::optional<ValidationSet> val;
  std::optional<RunLock> run_lock;  // the lead's, before anything in run_dir is read or written
  RunLog log;                       // rank log from the lock on, metrics from the header on
  CheckpointManager ckpt;
  std::optional<std::string> resume_from;  // the checkpoint this run continues
  // QLoRA: what the manifests record of the quantised base (quantised_base_record), else null.
  nlohmann::json quantised_base;
  DeviceDecision device_choice;      // where this rank computes, and why
  std::shared_ptr<ExecContext> ctx;  // shared with DistRun when run_train made it
  std::unique_ptr<RankModel> model;
  std::unique_ptr<DataParallel> data_parallel;
  std::unique_ptr<Optimizer> opt;
  std::optional<OverflowTestHook> overflow_test;
  std::optional<StopSignals> stop;
  ParallelLayout layout;
  int64_t start_step = 0;

  // The global batch: dp x grad_accum x micro_batch sequences of data.seq_len.
  double tokens_per_step = 0, flops_per_step = 0;
  float grad_scale = 0;         // 1 / tokens_per_step: every rank's loss gradient scale
  double peak_flops_per_s = 0;  // the MFU denominator, all ranks together
  PeakChoice peak;              // one rank's MFU peak and where it came from (lead)
  std::unique_ptr<Loader> loader;
  std::vector<Batch> micro;  // this DP rank's micro-batches of the step in progress

 private:
  void check_data();
  // data.dir's tokenizer must be the init_from model's (same fingerprint); UserError if not.
  void check_tokenizer() const;
  std::optional<LoadedCheckpoint> load_resume_checkpoint();
  void resume(LoadedCheckpoint& ck);
  void print_header(const PeakChoice& peak) const;
  // Epoch mode: the data line (units, sequences, truncated and dropped samples) and its record.
  void report_epochs();
};

}  // namespace braid
