// What the training loop writes about itself: per-step kernel-time splits, memory figures,
// the rank's own log file, and small checks around resuming.
#pragma once

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "core/memory.h"
#include "core/model_config.h"
#include "core/profile.h"
#include "launch/train_config.h"

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

}  // namespace braid
