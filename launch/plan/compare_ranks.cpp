// --compare beyond kernel groups: the layout-level quantities of a (multi-rank) run against the
// planner's time and memory models (docs/plan.md, "Comparing with a multi-rank run").
#include <fmt/format.h>

#include <numeric>

#include "launch/plan/compare.h"

namespace braid::plan {

namespace {

// One row: a quantity both sides have (measured < 0: the run does not have it).
struct Row {
  std::string name;
  double predicted = 0, measured = -1;
  std::string note;
};

// What the planner and the run say, for rank 0. The run's "other" is everything of rank 0's
// step that no kernel group was charged with: waiting on collectives and pipeline messages,
// pipeline idle, data loading, glue. Its pipeline idle is estimated as stage 0's measured
// bubble times the pipeline pass, taken as the step less the optimizer group.
struct RankFigures {
  double pred_bubble = 0, pred_non_kernel = 0, pred_comm = 0;
  double meas_bubble = -1, meas_other = -1, meas_comm = -1, meas_idle0 = 0;
};

RankFigures figures(const PlanResult& r, const MeasuredRun& run) {
  RankFigures f;
  const TimeBreakdown& t = r.time;
  const double pass = t.compute + t.tp_comm + t.cp_comm + t.bubble;
  f.pred_bubble = pass > 0 ? t.bubble / pass : 0.0;
  f.pred_comm = t.tp_comm + t.cp_comm + t.p2p + t.dp_exposed + t.param_gather;
  f.pred_non_kernel = f.pred_comm + t.bubble;
  if (!run.bubble.empty())
    f.meas_bubble = std::accumulate(run.bubble.begin(), run.bubble.end(), 0.0) /
                    static_cast<double>(run.bubble.size());
  auto other = run.kernel_s.find("other");
  if (other != run.kernel_s.end()) {
    f.meas_other = other->second;
    auto opt = run.kernel_s.find("optimizer");
    const double optimizer = opt == run.kernel_s.end() ? 0.0 : opt->second;
    f.meas_idle0 = run.bubble.empty() ? 0.0 : run.bubble.front() * (run.step_s - optimizer);
    f.meas_comm = std::max(0.0, f.meas_other - f.meas_idle0);
  }
  return f;
}

std::vector<Row> time_rows(const PlanResult& r, const MeasuredRun& run) {
  const RankFigures f = figures(r, run);
  std::vector<Row> rows;
  rows.push_back({"step s", r.time.step(), run.step_s, "seconds per optimizer step"});
  if (r.layout.pp > 1)
    rows.push_back({"bubble fraction", f.pred_bubble, f.meas_bubble,
                    fmt::format("planner (p-1)/(v m) of the pass; run: mean over {} stages of "
                                "1 - busy/makespan",
                                run.bubble.size())});
  rows.push_back({"non-kernel s", f.pred_non_kernel, f.meas_other,
                  "planner: bubble + TP + p2p + exposed DP; run: step - kernel groups on rank 0 "
                  "(waits, pipeline idle, data, glue)"});
  rows.push_back({"exposed comm s", f.pred_comm, f.meas_comm,
                  fmt::format("planner: TP + p2p + exposed DP; run: non-kernel - stage-0 idle "
                              "({:.4f} s = bubble[0] x (step - optimizer))",
                              f.meas_idle0)});
  return rows;
}

// Planner categories by the allocator's names (core/memory.h); the planner has no workspace,
// master-weight (fp32 runs) or "other" category, the allocator no runtime overhead.
std::vector<Row> memory_rows(const MemoryBreakdown& m, const MeasuredRun& run) {
  auto meas = [&](const char* k) {
    auto it = run.peak_mib.find(k);
    return it == run.peak_mib.end() ? (run.peak_mib.empty() ? -1.0 : 0.0) : it->second;
  };
  std::vector<Row> rows = {{"weights", m.weights / kMiB, meas("weights"), ""},
                           {"grads", m.grads / kMiB, meas("grads"), ""},
                           {"optimizer", m.optimizer / kMiB, meas("optimizer"), ""},
                           {"activations", m.activations / kMiB, meas("activations"), ""},
                           {"communication", m.comm / kMiB, meas("communication"), ""}};
  if (m.gathered > 0)
    rows.push_back({"gathered (ZeRO-3)", m.gathered / kMiB, -1, "no allocator category"});
  for (const char* k : {"master_weights", "workspace", "other"})
    if (meas(k) > 0) rows.push_back({k, 0.0, meas(k), "not in the planner's model"});
  rows.push_back({"overhead", m.overhead / kMiB, -1, "runtime + fragmentation; not allocator"});
  rows.push_back({"total (allocator)", (m.total() - m.overhead) / kMiB,
                  run.peak_total_mib > 0 ? run.peak_total_mib : -1.0,
                  "peak of all categories at once vs the planner's sum less overhead"});
  return rows;
}

std::string error_str(const Row& row) {
  if (!(row.measured > 0) || !(row.predicted > 0)) return "";
  return fmt::format("{:+.1f}%", 100.0 * (row.predicted - row.measured) / row.measured);
}

std::string table(const std::vector<Row>& rows, int digits) {
  std::string o;
  for (const Row& row : rows)
    o += fmt::format("  {:<18}{:>12.{}f}{:>12}{:>10}  {}\n", row.name, row.predicted, digits,
                     row.measured >= 0 ? fmt::format("{:.{}f}", row.measured, digits) : "-",
                     error_str(row), row.note);
  return o;
}

nlohmann::json rows_json(const std::vector<Row>& rows) {
  nlohmann::json j = nlohmann::json::object();
  for (const Row& row : rows) {
    nlohmann::json e = {{"predicted", row.predicted}};
    if (row.measured >= 0) e["measured"] = row.measured;
    if (row.measured > 0 && row.predicted > 0)
      e["error"] = (row.predicted - row.measured) / row.measured;
    j[row.name] = e;
  }
  return j;
}

}  // namespace

std::string compare_ranks_text(const PlanResult& r, const MemoryBreakdown& rank0,
                               const MeasuredRun& run) {
  const Layout& l = r.layout;
  std::string o = fmt::format(
      "\nlayout dp={} tp={} pp={}{} ({} ranks), rank 0 = stage 0: predicted vs measured\n", l.dp,
      l.tp, l.pp, l.pp > 1 ? fmt::format(" schedule {} v={}", l.schedule, l.vp) : std::string(),
      l.gpus());
  o += fmt::format("  {:<18}{:>12}{:>12}{:>10}\n", "quantity", "predicted", "measured", "error");
  o += table(time_rows(r, run), 4);
  if (!run.bubble.empty()) {
    std::string per;
    for (double b : run.bubble) per += fmt::format("{}{:.1f}%", per.empty() ? "" : " ", 100 * b);
    o += fmt::format("  measured bubble per stage: {}\n", per);
  }
  o += fmt::format("\nmemory of rank 0 (MiB): planner's stage-0 model vs the allocator's peaks\n");
  o += fmt::format("  {:<18}{:>12}{:>12}{:>10}\n", "category", "predicted", "measured", "error");
  o += table(memory_rows(rank0, run), 2);
  if (run.peak_mib.empty())
    o += "  (the run's metrics have no peak_memory_mib: it was trained by an older braid)\n";
  return o;
}

nlohmann::json compare_ranks_json(const PlanResult& r, const MemoryBreakdown& rank0,
                                  const MeasuredRun& run) {
  const Layout& l = r.layout;
  nlohmann::json j = {
      {"layout",
       {{"dp", l.dp}, {"tp", l.tp}, {"pp", l.pp}, {"vp", l.vp}, {"schedule", l.schedule}}},
      {"time", rows_json(time_rows(r, run))},
      {"memory_mib", rows_json(memory_rows(rank0, run))}};
  if (!run.bubble.empty()) j["measured_bubble_per_stage"] = run.bubble;
  return j;
}

}  // namespace braid::plan
