#include "launch/plan/compare.h"

#include <cmath>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "core/error.h"

namespace braid::plan {

namespace {

struct Window {
  int64_t steps = 0;
  double step_s = 0;
  std::map<std::string, double> kernel_s;
};

// The predicted seconds per step of each group the profiler measures; "kernel_calls" is the
// planner's fork/join estimate, which a run measures inside the groups.
std::vector<std::pair<std::string, double>> predicted_groups(const PlanResult& r) {
  const CpuStepTime& k = r.cpu_kernels;
  return {{"gemm", k.gemm},
          {"attention", k.attention},
          {"lm_head", k.lm_head},
          {"elementwise", k.elementwise},
          {"activation", k.activation},
          {"optimizer", k.optimizer},
          {"kernel_calls", k.calls},
          {"other", 0.0}};
}

double measured_group(const MeasuredRun& run, const std::string& g) {
  auto it = run.kernel_s.find(g);
  return it == run.kernel_s.end() ? 0.0 : it->second;
}

double error_pct(double predicted, double measured) {
  return measured > 0 ? 100.0 * (predicted - measured) / measured : 0.0;
}

void check_same_keys(const std::vector<RatePoint>& a, const std::vector<RatePoint>& b, const char* what) {
  bool same = a.size() == b.size();
  for (size_t i = 0; same && i < a.size(); ++i) same = a[i].key == b[i].key;
  if (!same)
    user_error("device profiles to average have different {} tables; calibrate them with the same braid", what);
}

void harmonic_tables(std::vector<RatePoint>& acc, const std::vector<RatePoint>& add, const char* what) {
  check_same_keys(acc, add, what);
  for (size_t i = 0; i < acc.size(); ++i) acc[i].rate += 1.0 / add[i].rate;
}

}  // namespace

MeasuredRun read_run_metrics(const std::string& run_dir) {
  MeasuredRun run;
  run.metrics_path = (std::filesystem::path(run_dir) / "metrics.jsonl").string();
  std::ifstream in(run.metrics_path);
  if (!in) user_error("--compare: cannot open '{}'; give the directory of a braid train run", run.metrics_path);
  std::vector<Window> windows;
  int64_t prev_step = 0;
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty()) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const std::exception&) {
      user_error("--compare: {}:{} is not a JSON line", run.metrics_path, lineno);
    }
    if (j.contains("event")) {
      const std::string ev = j.value("event", "");
      if (ev == "start" || ev == "resume") {
        windows.clear();  // only the last training segment
        prev_step = j.value("step", int64_t{0});
      }
      continue;
    }
    if (!j.contains("step_s") || !j.contains("step")) continue;
    Window w;
    const int64_t step = j.at("step").get<int64_t>();
    w.steps = step - prev_step;
    prev_step = step;
    w.step_s = j.at("step_s").get<double>();
    if (j.contains("kernel_s"))
      for (auto it = j.at("kernel_s").begin(); it != j.at("kernel_s").end(); ++it)
        w.kernel_s[it.key()] = it.value().get<double>();
    if (w.steps > 0) windows.push_back(std::move(w));
  }
  if (windows.empty())
    user_error("--compare: '{}' has no timed log windows; train a few log intervals first", run.metrics_path);
  const size_t first = windows.size() > 1 ? 1 : 0;
  run.skipped_windows = static_cast<int>(first);
  double time = 0;
  for (size_t i = first; i < windows.size(); ++i) {
    const Window& w = windows[i];
    run.steps += w.steps;
    ++run.windows;
    time += w.step_s * static_cast<double>(w.steps);
    for (const auto& [k, v] : w.kernel_s) run.kernel_s[k] += v * static_cast<double>(w.steps);
  }
  run.step_s = time / static_cast<double>(run.steps);
  for (auto& [k, v] : run.kernel_s) v /= static_cast<double>(run.steps);
  return run;
}

GpuSpec average_profiles(const std::vector<GpuSpec>& profiles) {
  BRAID_CHECK(!profiles.empty(), "average_profiles of nothing");
  if (profiles.size() == 1) return profiles.front();
  GpuSpec g = profiles.front();
  // Accumulate reciprocals (times per unit of work), then invert their mean.
  auto inv = [](double& v) { v = v > 0 ? 1.0 / v : 0.0; };
  auto inv_table = [&](std::vector<RatePoint>& t) {
    for (RatePoint& p : t) inv(p.rate);
  };
  std::vector<double*> scalars = {&g.tflops_fp32, &g.tflops_bf16, &g.tflops_fp16, &g.mem_bw_gbs,
                                  &g.intra_bw_gbs, &g.inter_bw_gbs, &g.elementwise_gbs,
                                  &g.gelu_gelems, &g.swiglu_gelems};
  std::vector<std::vector<RatePoint>*> tables = {&g.gemm_by_width, &g.gemm_llama_by_width,
                                                 &g.attention_by_head_dim, &g.attention_gqa_by_head_dim,
                                                 &g.lm_head_by_width, &g.attention_by_seq, &g.gemm_by_tokens,
                                                 &g.lm_head_by_vocab, &g.block_elementwise_by_width, &g.optimizer_by_params,
                                                 &g.block_elementwise_llama_by_width};
  for (double* s : scalars) inv(*s);
  for (auto* t : tables) inv_table(*t);
  for (size_t i = 1; i < profiles.size(); ++i) {
    const GpuSpec& p = profiles[i];
    const std::vector<double> ps = {p.tflops_fp32, p.tflops_bf16, p.tflops_fp16, p.mem_bw_gbs,
                                    p.intra_bw_gbs, p.inter_bw_gbs, p.elementwise_gbs,
                                    p.gelu_gelems, p.swiglu_gelems};
    for (size_t k = 0; k < scalars.size(); ++k) *scalars[k] += ps[k] > 0 ? 1.0 / ps[k] : 0.0;
    const std::vector<const std::vector<RatePoint>*> pt = {&p.gemm_by_width, &p.gemm_llama_by_width,
                                                           &p.attention_by_head_dim, &p.attention_gqa_by_head_dim,
                                                           &p.lm_head_by_width, &p.attention_by_seq, &p.gemm_by_tokens,
                                                           &p.lm_head_by_vocab, &p.block_elementwise_by_width, &p.optimizer_by_params,
                                                           &p.block_elementwise_llama_by_width};
    const char* names[] = {"GEMM", "Llama GEMM", "attention", "GQA attention", "LM head", "attention-by-T",
                           "GEMM-by-tokens", "LM-head-by-vocab", "block element-wise", "optimizer",
                           "Llama block element-wise"};
    for (size_t k = 0; k < tables.size(); ++k) harmonic_tables(*tables[k], *pt[k], names[k]);
    if (p.attention_ref_seq != g.attention_ref_seq || p.gemm_ref_tokens != g.gemm_ref_tokens ||
        p.lm_head_ref_vocab != g.lm_head_ref_vocab)
      user_error("device profiles to average were measured at different reference shapes");
    g.kernel_call_us += p.kernel_call_us;  // a time: arithmetic mean below
    g.memory_gib = std::min(g.memory_gib, p.memory_gib);
  }
  const double n = static_cast<double>(profiles.size());
  for (double* s : scalars) *s = *s > 0 ? n / *s : 0.0;
  for (auto* t : tables)
    for (RatePoint& p : *t) p.rate = n / p.rate;
  g.kernel_call_us /= n;
  g.description = fmt::format("mean of {} device profiles", profiles.size());
  return g;
}

std::string compare_text(const PlanResult& r, const MeasuredRun& run) {
  std::string o = fmt::format(
      "\npredicted vs measured ({}: mean of {} steps in {} log windows, {} warm-up window left out)\n",
      run.metrics_path, run.steps, run.windows, run.skipped_windows);
  o += fmt::format("  {:<14}{:>12}{:>12}{:>10}\n", "group", "predicted s", "measured s", "error");
  for (const auto& [name, pred] : predicted_groups(r)) {
    const bool has = run.kernel_s.count(name) > 0;
    const double meas = measured_group(run, name);
    o += fmt::format("  {:<14}{:>12.4f}{:>12}{:>10}\n", name, pred, has ? fmt::format("{:.4f}", meas) : "-",
                     has && meas > 0 && pred > 0 ? fmt::format("{:+.1f}%", error_pct(pred, meas)) : "");
  }
  const double pred = r.time.step();
  o += fmt::format("  {:<14}{:>12.4f}{:>12.4f}{:>10}\n", "step", pred, run.step_s,
                   fmt::format("{:+.1f}%", error_pct(pred, run.step_s)));
  if (run.kernel_s.empty())
    o += "  (the run's metrics have no kernel_s: it was trained by an older braid)\n";
  return o;
}

nlohmann::json compare_json(const PlanResult& r, const MeasuredRun& run) {
  nlohmann::json groups = nlohmann::json::object();
  for (const auto& [name, pred] : predicted_groups(r)) {
    nlohmann::json g = {{"predicted", pred}};
    if (run.kernel_s.count(name)) g["measured"] = measured_group(run, name);
    groups[name] = g;
  }
  const double pred = r.time.step();
  return {{"metrics", run.metrics_path},
          {"steps", run.steps},
          {"windows", run.windows},
          {"predicted_step_s", pred},
          {"measured_step_s", run.step_s},
          {"error", run.step_s > 0 ? (pred - run.step_s) / run.step_s : 0.0},
          {"groups", groups}};
}

}  // namespace braid::plan
