// What the training loop writes about itself: per-step kernel-time splits, memory figures,
// the rank's own log file, the run's log (RunLog), the metrics step hook (the step log line,
// metrics.jsonl's train / loss_scale / end records), and small checks around resuming.
#pragma once

#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/memory.h"
#include "core/model_config.h"
#include "core/profile.h"
#include "launch/config/train_config.h"
#include "launch/report/metrics.h"
#include "launch/train/memory_report.h"
#include "launch/train/train_hooks.h"

namespace braid {

// Seconds per step by kernel group, plus "other" (the rest of the step: data, allocation,
// framework glue, waiting for other ranks), for metrics.jsonl.
nlohmann::json kernel_seconds_json(const KernelTimes& k, double step_time, int64_t steps);
// "time per step 0.412 s: gemm 0.281 (68%) | attention ..." for the end of a run.
std::string time_split_line(const KernelTimes& k, double step_time, int64_t steps);
// Live bytes by allocation category now and the allocator's cache, in MiB.
nlohmann::json memory_by_category_mib(const MemoryStats& s);
double peak_rss_mib();
// First differing model key between a checkpoint's config and ours, or "".
std::string model_difference(const nlohmann::json& saved, const ModelConfig& ours);
// meta.json's unigram entropy (written by `braid prepare`), or -1.
double read_unigram_entropy(const std::string& meta_path);
// When to write a checkpoint after step `done`: every checkpoint.interval steps, at the end,
// when checkpoint.interval_minutes of training passed since the last one, or when asked to stop.
bool checkpoint_due(const CheckpointConfig& c, int64_t done, int64_t total, double minutes_since,
                    bool stopping);

// This rank's own log (logs/rank-N.log) in a multi-rank run; nothing for one process
// (rank < 0).
class RankLog {
 public:
  RankLog(const std::filesystem::path& run_dir, int rank);
  void line(const std::string& s);

 private:
  std::ofstream out_;
};

// The run's log: lines for people (stdout on the lead rank, every rank's own log file) and
// metrics.jsonl records (the lead rank). Each part does nothing until opened.
class RunLog {
 public:
  // This rank's log file (logs/rank-N.log), for a multi-rank run (rank >= 0).
  void open_rank_log(const std::filesystem::path& run_dir, int rank);
  // metrics.jsonl and TensorBoard (launch/report/metrics.h): the lead rank, once the header is out.
  void open_metrics(const std::filesystem::path& run_dir, int64_t total_steps, int64_t resume_step);
  bool has_metrics() const { return metrics_.has_value(); }

  // A line on stdout (lead) and in the rank log.
  void say(const std::string& line);
  // A metrics.jsonl record (lead).
  void record(const std::string& event, nlohmann::json fields);
  // The rank log alone.
  void rank_line(const std::string& line);
  void progress(int64_t step, double loss);  // the terminal progress bar (lead)

 private:
  std::optional<RankLog> rank_;
  std::optional<MetricsLog> metrics_;
};

// Metrics over windows of train.log_interval steps: the step log line (loss, lr, norm, tok/s,
// FLOP/s, MFU, memory, the pipeline bubble, ETA) and the "train" record, the fp16 "loss_scale"
// record, and at the end the "end" record with the run's time split and memory peaks. The
// bubble is summed over the pipeline group (collective).
class MetricsHook final : public TrainHook {
 public:
  explicit MetricsHook(TrainRun& run);
  void on_step_end(StepInfo& s) override;
  void on_train_end(const TrainSummary& summary) override;

 private:
  void end_window(const StepInfo& s);
  TrainRun& run_;
  MemoryWindows memory_;
  double window_time_ = 0, window_loss_ = 0, train_time_ = 0;
  double window_busy_ = 0, window_makespan_ = 0;  // this stage's pipeline time in the window
  int window_steps_ = 0, window_loss_steps_ = 0, window_skipped_ = 0;
  double max_mfu_ = 0;                          // the highest of the run's windows (lead)
  KernelTimes window_kernels_, train_kernels_;  // the steps only (evaluation, saving excluded)
};

}  // namespace braid
