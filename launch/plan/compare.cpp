#include "launch/plan/compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "launch/config/config_json.h"

namespace braid::plan {

namespace {

struct Window {
  int64_t steps = 0;
  double step_s = 0;
  std::map<std::string, double> kernel_s;
  std::vector<double> bubble;
  std::map<std::string, double> peak_mib;
  double peak_total_mib = 0;
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

void check_same_keys(const std::vector<RatePoint>& a, const std::vector<RatePoint>& b,
                     const char* what) {
  bool same = a.size() == b.size();
  for (size_t i = 0; same && i < a.size(); ++i) same = a[i].key == b[i].key;
  if (!same)
    user_error(
        "device profiles to average have different {} tables; calibrate them with the same braid",
        what);
}

}  // namespace

void check_same_step(const ConfigPlanInput& run, const ConfigPlanInput& given,
                     const std::string& run_path, const std::string& given_path) {
  std::vector<std::string> diffs;
  const nlohmann::json a = fields_to_json(run.model), b = fields_to_json(given.model);
  for (auto it = a.begin(); it != a.end(); ++it)
    if (!b.contains(it.key()) || b.at(it.key()) != it.value())
      diffs.push_back(fmt::format("model.{} {} vs {}", it.key(), it.value().dump(),
                                  b.contains(it.key()) ? b.at(it.key()).dump() : "missing"));
  auto shape = [&](const char* what, int64_t x, int64_t y) {
    if (x != y) diffs.push_back(fmt::format("{} {} vs {}", what, x, y));
  };
  shape("micro-batch", run.train.micro_batch, given.train.micro_batch);
  shape("sequence length", run.train.seq, given.train.seq);
  shape("sequences per step", run.train.global_batch, given.train.global_batch);
  shape("parallel.dp", run.layout.dp, given.layout.dp);
  shape("parallel.tp", run.layout.tp, given.layout.tp);
  shape("parallel.pp", run.layout.pp, given.layout.pp);
  shape("virtual stages", run.layout.vp, given.layout.vp);
  if (run.layout.pp > 1 && run.layout.schedule != given.layout.schedule)
    diffs.push_back(fmt::format("schedule {} vs {}", run.layout.schedule, given.layout.schedule));
  if (diffs.empty()) return;
  std::string list;
  for (const std::string& d : diffs) list += (list.empty() ? "" : "; ") + d;
  user_error(
      "--compare: the run was trained with another step than {} describes ({} vs {}: {}); drop "
      "--config to use the run's own",
      given_path, run_path, given_path, list);
}

std::string check_same_device(const DeviceProfile& profile, const std::string& profile_path,
                              const RunLayout& run) {
  const std::string measured = profile.device.empty() ? "cpu" : profile.device;
  if (measured != run.device)
    user_error(
        "--compare: the device profile '{}' was calibrated on {} ({}) but the run trained on {} "
        "({}: {}); calibrate on the run's device with braid plan --calibrate --device {}",
        profile_path, measured == "cuda" ? "a GPU" : "the CPU", profile.gpu.name,
        run.device == "cuda" ? "a GPU" : "the CPU", run.path,
        run.device_detail.empty() ? "no device recorded: the CPU" : run.device_detail,
        run.device);
  if (measured == "cuda" && !profile.gpu.name.empty() &&
      run.device_detail.find(profile.gpu.name) == std::string::npos)
    return fmt::format(
        "note: the profile was calibrated on {}, the run's rank 0 ran on {} ({})\n",
        profile.gpu.name, run.device_detail, run.path);
  return "";
}

MeasuredRun read_run_metrics(const std::string& run_dir) {
  MeasuredRun run;
  run.metrics_path = (std::filesystem::path(run_dir) / "metrics.jsonl").string();
  std::ifstream in(run.metrics_path);
  if (!in)
    user_error("--compare: cannot open '{}'; give the directory of a braid train run",
               run.metrics_path);
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
      // Log windows carry event "train"; metrics from before events had one carry none.
      if (ev != "train") continue;
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
    if (j.contains("bubble") && j.at("bubble").is_array())
      for (const auto& b : j.at("bubble")) w.bubble.push_back(b.get<double>());
    if (j.contains("peak_memory_mib") && j.at("peak_memory_mib").is_object())
      for (auto it = j.at("peak_memory_mib").begin(); it != j.at("peak_memory_mib").end(); ++it)
        w.peak_mib[it.key()] = it.value().get<double>();
    w.peak_total_mib = j.value("peak_tensor_mib", 0.0);
    if (w.steps > 0) windows.push_back(std::move(w));
  }
  if (windows.empty())
    user_error("--compare: '{}' has no timed log windows; train a few log intervals first",
               run.metrics_path);
  const size_t first = windows.size() > 1 ? 1 : 0;
  run.skipped_windows = static_cast<int>(first);
  double time = 0;
  // Peaks after the warm-up window too: the first window's include building the model (the
  // whole model exists before the tensor-parallel split and the pipeline's stage cut).
  for (size_t i = first; i < windows.size(); ++i) {
    const Window& w = windows[i];
    for (const auto& [k, v] : w.peak_mib) run.peak_mib[k] = std::max(run.peak_mib[k], v);
    run.peak_total_mib = std::max(run.peak_total_mib, w.peak_total_mib);
  }
  int64_t bubble_steps = 0;
  for (size_t i = first; i < windows.size(); ++i) {
    const Window& b = windows[i];
    if (b.bubble.empty()) continue;
    if (run.bubble.empty()) run.bubble.assign(b.bubble.size(), 0.0);
    if (b.bubble.size() != run.bubble.size())
      user_error("--compare: {} has log windows with different numbers of pipeline stages",
                 run.metrics_path);
    for (size_t k = 0; k < b.bubble.size(); ++k)
      run.bubble[k] += b.bubble[k] * static_cast<double>(b.steps);
    bubble_steps += b.steps;
  }
  for (double& v : run.bubble) v /= static_cast<double>(bubble_steps);
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

// The rates of a profile that average_profiles combines: scalars and tables, by member.
constexpr double GpuSpec::*kGpuRates[] = {&GpuSpec::tflops_fp32,  &GpuSpec::tflops_bf16,
                                          &GpuSpec::tflops_fp16,  &GpuSpec::mem_bw_gbs,
                                          &GpuSpec::intra_bw_gbs, &GpuSpec::inter_bw_gbs};
constexpr double CpuProfile::*kCpuRates[] = {&CpuProfile::elementwise_gbs, &CpuProfile::gelu_gelems,
                                             &CpuProfile::swiglu_gelems};
const std::pair<const char*, std::vector<RatePoint> CpuProfile::*> kRateTables[] = {
    {"GEMM", &CpuProfile::gemm_by_width},
    {"Llama GEMM", &CpuProfile::gemm_llama_by_width},
    {"GEMM-by-tokens", &CpuProfile::gemm_by_tokens},
    {"attention", &CpuProfile::attention_by_head_dim},
    {"GQA attention", &CpuProfile::attention_gqa_by_head_dim},
    {"attention-by-T", &CpuProfile::attention_by_seq},
    {"attention-by-width", &CpuProfile::attention_by_width},
    {"LM head", &CpuProfile::lm_head_by_width},
    {"LM-head-by-vocab", &CpuProfile::lm_head_by_vocab},
    {"block element-wise", &CpuProfile::block_elementwise_by_width},
    {"Llama block element-wise", &CpuProfile::block_elementwise_llama_by_width},
    {"optimizer", &CpuProfile::optimizer_by_params}};

DeviceProfile average_profiles(const std::vector<DeviceProfile>& profiles) {
  BRAID_CHECK(!profiles.empty(), "average_profiles of nothing");
  if (profiles.size() == 1) return profiles.front();
  const CpuProfile& first = profiles.front().cpu;
  for (const DeviceProfile& d : profiles) {
    if ((d.device.empty() ? "cpu" : d.device) !=
        (profiles.front().device.empty() ? "cpu" : profiles.front().device))
      user_error("device profiles to average were calibrated on different devices ({} and {})",
                 profiles.front().gpu.name, d.gpu.name);
    const CpuProfile& p = d.cpu;
    for (const auto& [name, table] : kRateTables) check_same_keys(first.*table, p.*table, name);
    if (p.attention_ref_seq != first.attention_ref_seq ||
        p.attention_ref_width != first.attention_ref_width ||
        p.gemm_ref_tokens != first.gemm_ref_tokens ||
        p.lm_head_ref_vocab != first.lm_head_ref_vocab)
      user_error("device profiles to average were measured at different reference shapes");
  }
  // Rates average harmonically (the mean of the times per unit of work); a time arithmetically.
  const double n = static_cast<double>(profiles.size());
  auto harmonic = [&](auto&& rate_of) {
    double inv = 0;
    for (const DeviceProfile& p : profiles) {
      const double r = rate_of(p);
      if (!(r > 0)) return 0.0;  // not measured in one of them
      inv += 1.0 / r;
    }
    return n / inv;
  };
  DeviceProfile out = profiles.front();
  for (double GpuSpec::*s : kGpuRates)
    out.gpu.*s = harmonic([&](const DeviceProfile& p) { return p.gpu.*s; });
  for (double CpuProfile::*s : kCpuRates)
    out.cpu.*s = harmonic([&](const DeviceProfile& p) { return p.cpu.*s; });
  for (const auto& [name, table] : kRateTables)
    for (size_t i = 0; i < (out.cpu.*table).size(); ++i)
      (out.cpu.*table)[i].rate =
          harmonic([&](const DeviceProfile& p) { return (p.cpu.*table)[i].rate; });
  out.cpu.kernel_call_us = 0;
  out.cpu.comm_latency_us = 0;
  out.cpu.comm_bus_gbs = harmonic([&](const DeviceProfile& p) { return p.cpu.comm_bus_gbs; });
  for (const DeviceProfile& p : profiles) {
    out.cpu.kernel_call_us += p.cpu.kernel_call_us / n;
    out.cpu.comm_latency_us += p.cpu.comm_latency_us / n;
    if (p.cpu.threads != first.threads)
      user_error("device profiles to average were calibrated on {} and {} threads", first.threads,
                 p.cpu.threads);
    out.gpu.memory_gib = std::min(out.gpu.memory_gib, p.gpu.memory_gib);
  }
  out.gpu.description = fmt::format("mean of {} device profiles", profiles.size());
  return out;
}

std::string compare_text(const PlanResult& r, const MeasuredRun& run) {
  std::string o = fmt::format(
      "\npredicted vs measured ({}: mean of {} steps in {} log windows, {} warm-up window left "
      "out)\n",
      run.metrics_path, run.steps, run.windows, run.skipped_windows);
  if (r.layout.gpus() > 1)
    o += fmt::format(
        "  kernel groups of rank 0 (stage 0 of {}, its 1/{} share of the tensor-parallel work); "
        "\"other\" is the rest of its step\n",
        r.layout.pp, r.layout.tp);
  o += fmt::format("  {:<14}{:>12}{:>12}{:>10}\n", "group", "predicted s", "measured s", "error");
  for (const auto& [name, pred] : predicted_groups(r)) {
    const bool has = run.kernel_s.count(name) > 0;
    const double meas = measured_group(run, name);
    o += fmt::format(
        "  {:<14}{:>12.4f}{:>12}{:>10}\n", name, pred, has ? fmt::format("{:.4f}", meas) : "-",
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
