// Published training runs as planner inputs: the validation data set of docs/plan.md ("H100
// validation"), read from a JSON file (tests/data/h100_runs.json) by its ctest and by the tool that
// fits the efficiency constants (tools/fit_h100_efficiency.cpp), so both run the same points.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "launch/plan/plan_types.h"

namespace braid::plan {

struct PublishedRun {
  std::string id, source, set;   // set: "fit" (used to choose constants) or "heldout"
  std::string metric;            // tokens_per_s_per_gpu, model_tflops_per_gpu or step_s
  double reported = 0;           // the source's figure in that metric
  int64_t published_params = 0;  // the source's parameter count, 0 when it gives none
  ModelConfig model;
  TrainOptions train;
  Layout layout;
  Cluster cluster;
  double mem_bw_gbs = 0;  // > 0: the source's GPUs have this HBM bandwidth, not the table's
  // > 0: the source states that its GPUs' peak lies between this (a lower-clocked part's dense
  // peak, TFLOP/s at the run's precision) and the file's GPU's, and not where: the prediction is
  // then an interval (relative_error_range).
  double peak_low_tflops = 0;
  std::string peak_low_gpu;
};

// Reads every run of `path`. Throws UserError naming the file, the run and the key on a missing
// or malformed field, an unknown metric, set or GPU, or a layout that does not cover the GPUs.
std::vector<PublishedRun> load_published_runs(const std::string& path);

// A what-if on the file: every run of `source` gets `key` set to `value` (a number when it parses
// as one, else a string) before it is read, as if the file said so (tools/fit_h100_efficiency
// --set, for the sensitivities docs/plan.md quotes).
struct RunOverride {
  std::string source, key, value;
};
std::vector<PublishedRun> load_published_runs(const std::string& path,
                                              const std::vector<RunOverride>& overrides);

// The planner's value of `run.metric` for a prediction of `run`.
double predicted_metric(const PublishedRun& run, const PlanResult& p);

// Predicted speed / reported speed - 1 for `run` predicted on `gpu` (the run's own bandwidth
// override is kept): > 0 means the planner is optimistic, whatever the metric (a step time is
// inverted). What the fitting tool minimises and the test checks.
// For a run whose peak is only bracketed (peak_low_tflops > 0), the distance from the published
// value to the predicted interval: 0 inside it, else the error of the nearer end.
double relative_error(const PublishedRun& run, const GpuSpec& gpu);

// The errors at the two ends of a bracketed peak: {at peak_low_tflops, at gpu's own peak}; both
// the plain error for other runs.
std::pair<double, double> relative_error_range(const PublishedRun& run, const GpuSpec& gpu);

}  // namespace braid::plan
