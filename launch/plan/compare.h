// Prediction against a finished run: `braid plan --config X --device-profile P --compare RUN`
// reads RUN/metrics.jsonl (the step time and the kernel-group times braid train logs, see
// core/profile.h) and sets them beside the calibrated CPU model's groups.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "launch/plan/config_input.h"
#include "launch/plan/plan_types.h"

namespace braid::plan {

struct MeasuredRun {
  std::string metrics_path;
  int64_t steps = 0;                       // steps averaged over (the log windows after the first)
  int windows = 0;                         // log windows averaged over
  int skipped_windows = 0;                 // warm-up windows left out
  double step_s = 0;                       // mean seconds per step over those windows
  std::map<std::string, double> kernel_s;  // mean seconds per step by group ("other" included)
  // Under pp > 1: each stage's measured bubble (1 - busy / makespan of the pipeline pass),
  // averaged over the same windows, weighted by their steps. Empty without pipeline stages.
  std::vector<double> bubble;
  // Rank 0's allocator peaks by category (peak_memory_mib), MiB: the maximum over the same
  // windows (the first one's peaks include building the model), and the total tensor peak.
  std::map<std::string, double> peak_mib;
  double peak_total_mib = 0;
};

// Reads the last training segment of <run_dir>/metrics.jsonl (after its last start/resume
// event): every log window except the first (warm-up, unless it is the only one), weighted by
// its steps. Throws UserError when the file is missing or has no timed windows.
MeasuredRun read_run_metrics(const std::string& run_dir);

// Throws UserError, naming both files and every differing key, when `given` (from
// given_path, with its --set overrides) describes another model or step shape than the run's
// own resolved config (run_path), or another layout (dp, tp, pp, schedule, virtual stages):
// the comparison would be meaningless.
void check_same_step(const ConfigPlanInput& run, const ConfigPlanInput& given,
                     const std::string& run_path, const std::string& given_path);

// Throws UserError, naming both files, when the profile was measured on another kind of device
// than the run trained on (a CPU profile against a GPU run, or the other way round): its kernel
// rates cannot time that run. `profile_device` is DeviceProfile::device ("" counts as "cpu").
// Returns a note (or "") when both are GPUs but the run's record does not name the profile's.
std::string check_same_device(const DeviceProfile& profile, const std::string& profile_path,
                              const RunLayout& run);

// Profiles measured at different times, as one: each rate is the harmonic mean of the
// profiles' rates (so predicted times are the mean of the times each profile predicts).
// Throws UserError when their rate tables do not have the same keys.
DeviceProfile average_profiles(const std::vector<DeviceProfile>& profiles);

// Rows group | predicted | measured | error, with the total.
std::string compare_text(const PlanResult& r, const MeasuredRun& run);
nlohmann::json compare_json(const PlanResult& r, const MeasuredRun& run);

// The layout-level comparison (compare_ranks.cpp): step, pipeline bubble fraction, non-kernel
// time and exposed communication on rank 0, and rank 0's memory by category (`rank0`: the
// planner's stage-0 memory) against the allocator's peaks.
std::string compare_ranks_text(const PlanResult& r, const MemoryBreakdown& rank0,
                               const MeasuredRun& run);
nlohmann::json compare_ranks_json(const PlanResult& r, const MemoryBreakdown& rank0,
                                  const MeasuredRun& run);

}  // namespace braid::plan
