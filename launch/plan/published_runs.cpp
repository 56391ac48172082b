// Published runs (docs/plan.md, "H100 validation") read into planner inputs.
#include "launch/plan/published_runs.h"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "launch/plan/gpu_table.h"
#include "launch/plan/presets.h"
#include "launch/plan/time_model.h"

namespace braid::plan {

namespace {

using nlohmann::json;

// A required field of run `id`, with the file, run and key in the error.
template <typename T>
T field(const json& j, const char* key, const std::string& path, const std::string& id) {
  if (!j.contains(key))
    user_error("{}: run '{}' has no '{}'; every run needs it (see the file's other runs)", path, id,
               key);
  try {
    return j.at(key).get<T>();
  } catch (const json::exception& e) {
    user_error("{}: run '{}', key '{}': {} ({})", path, id, key, j.at(key).dump(), e.what());
  }
}

template <typename T>
T optional(const json& j, const char* key, T fallback, const std::string& path,
           const std::string& id) {
  return j.contains(key) ? field<T>(j, key, path, id) : fallback;
}

ModelConfig run_model(const json& r, int seq, const std::string& path, const std::string& id) {
  ModelConfig m;
  if (r.contains("preset")) {
    m = find_preset(field<std::string>(r, "preset", path, id));
    if (m.is_llama()) m.context_length = std::max(m.context_length, seq);
    return m;
  }
  const json& s = r.contains("model") ? r.at("model") : json();
  if (!s.is_object())
    user_error("{}: run '{}' needs 'preset' or a 'model' object with the shape", path, id);
  m.family = field<std::string>(s, "family", path, id);
  m.n_layer = field<int>(s, "layers", path, id);
  m.n_embd = field<int>(s, "hidden", path, id);
  m.n_head = field<int>(s, "heads", path, id);
  m.n_kv_head = optional<int>(s, "kv_heads", 0, path, id);
  m.ffn_hidden = optional<int>(s, "ffn", 0, path, id);
  m.vocab_size = field<int>(s, "vocab", path, id);
  if (s.contains("tied")) m.tie_embeddings = field<bool>(s, "tied", path, id);
  m.context_length = seq;  // gpt2's learned positions cover the trained length
  try {
    m.validate();
  } catch (const ConfigError& e) {
    user_error("{}: run '{}', model.{}: {}", path, id, e.key(), e.what());
  }
  return m;
}

// The config enum value `text` of key `key` of run `id`.
template <class E>
E enum_value(const char* key, const std::string& text, const std::string& path,
             const std::string& id) {
  try {
    return parse_enum<E>(key, text);
  } catch (const ConfigError& e) {
    user_error("{}: run '{}', {}", path, id, e.what());
  }
}

}  // namespace

std::vector<PublishedRun> load_published_runs(const std::string& path) {
  return load_published_runs(path, {});
}

std::vector<PublishedRun> load_published_runs(const std::string& path,
                                              const std::vector<RunOverride>& overrides) {
  std::ifstream in(path);
  if (!in) user_error("cannot open published-runs file '{}'", path);
  json doc;
  try {
    doc = json::parse(in);
  } catch (const json::exception& e) {
    user_error("{}: not valid JSON: {}", path, e.what());
  }
  if (!doc.contains("runs") || !doc.at("runs").is_array())
    user_error("{}: expected an object with a 'runs' array", path);
  for (const RunOverride& o : overrides) {
    int hits = 0;
    for (json& r : doc.at("runs")) {
      if (!r.is_object() || r.value("source", std::string()) != o.source) continue;
      char* end = nullptr;
      const double number = std::strtod(o.value.c_str(), &end);
      if (!o.value.empty() && end == o.value.c_str() + o.value.size())
        r[o.key] = number == std::floor(number) ? json(static_cast<int64_t>(number)) : json(number);
      else
        r[o.key] = o.value;
      ++hits;
    }
    if (hits == 0)
      user_error("{}: no run has source '{}' (override of '{}')", path, o.source, o.key);
  }
  const std::string gpu_name = doc.value("gpu", std::string("h100-sxm"));
  const GpuSpec gpu = find_gpu(gpu_name);
  std::vector<PublishedRun> runs;
  for (const json& r : doc.at("runs")) {
    PublishedRun p;
    // A run without an id is named by its position (1-based) in the errors.
    p.id = r.contains("id") && r.at("id").is_string()
               ? r.at("id").get<std::string>()
               : std::string("number ").append(std::to_string(runs.size() + 1));
    p.source = field<std::string>(r, "source", path, p.id);
    p.set = field<std::string>(r, "set", path, p.id);
    if (p.set != "fit" && p.set != "heldout")
      user_error("{}: run '{}', set '{}': expected fit or heldout", path, p.id, p.set);
    p.metric = field<std::string>(r, "metric", path, p.id);
    if (p.metric != "tokens_per_s_per_gpu" && p.metric != "model_tflops_per_gpu" &&
        p.metric != "step_s")
      user_error(
          "{}: run '{}', metric '{}': expected tokens_per_s_per_gpu, "
          "model_tflops_per_gpu or step_s",
          path, p.id, p.metric);
    p.reported = field<double>(r, "reported", path, p.id);
    if (!(p.reported > 0))
      user_error("{}: run '{}', reported {}: expected > 0", path, p.id, p.reported);
    p.published_params = optional<int64_t>(r, "published_params", 0, path, p.id);
    const int seq = field<int>(r, "seq", path, p.id);
    p.model = run_model(r, seq, path, p.id);
    TrainOptions& t = p.train;
    t.seq = seq;
    t.global_batch = field<int64_t>(r, "global_batch", path, p.id);
    t.micro_batch = field<int>(r, "micro_batch", path, p.id);
    t.zero = field<int>(r, "zero", path, p.id);
    t.checkpointing = enum_value<Checkpointing>(
        "checkpointing", field<std::string>(r, "checkpointing", path, p.id), path, p.id);
    t.grad_precision = enum_value<Precision>(
        "grad_precision", optional<std::string>(r, "grad_precision", "fp32", path, p.id), path,
        p.id);
    t.dropout = optional<int>(r, "dropout", -1, path, p.id);
    t.tp_overlap = optional<bool>(r, "tp_overlap", false, path, p.id);
    t.attention_kernel = optional<std::string>(r, "attention", "flash", path, p.id);
    if (t.attention_kernel != "flash" && t.attention_kernel != "cudnn")
      user_error("{}: run '{}', attention '{}': expected flash or cudnn", path, p.id,
                 t.attention_kernel);
    t.virtual_stage_blocks =
        optional<std::vector<int>>(r, "virtual_stage_blocks", std::vector<int>{}, path, p.id);
    Layout& l = p.layout;
    l.tp = field<int>(r, "tp", path, p.id);
    l.pp = field<int>(r, "pp", path, p.id);
    l.cp = optional<int>(r, "cp", 1, path, p.id);
    l.vp = optional<int>(r, "vp", 1, path, p.id);
    l.schedule = l.vp > 1 ? "interleaved" : "1f1b";
    const int gpus = field<int>(r, "gpus", path, p.id);
    const int per_replica = l.tp * l.pp * l.cp;
    if (gpus % per_replica != 0 || gpus % gpu.gpus_per_node != 0)
      user_error(
          "{}: run '{}': {} GPUs do not split into whole nodes of {} and replicas of "
          "tp x pp x cp = {}",
          path, p.id, gpus, gpu.gpus_per_node, per_replica);
    l.dp = gpus / per_replica;
    Cluster& c = p.cluster;
    c.gpu = gpu;
    c.gpus_per_node = gpu.gpus_per_node;
    c.nodes = gpus / gpu.gpus_per_node;
    c.intra_bw_gbs = gpu.intra_bw_gbs;
    c.inter_bw_gbs = gpu.inter_bw_gbs;
    p.mem_bw_gbs = optional<double>(r, "gpu_mem_bw_gbs", 0.0, path, p.id);
    p.peak_low_gpu = optional<std::string>(r, "peak_low_gpu", "", path, p.id);
    if (!p.peak_low_gpu.empty()) {
      GpuSpec low;
      try {
        low = find_gpu(p.peak_low_gpu);
      } catch (const UserError& e) {
        user_error("{}: run '{}', peak_low_gpu: {}", path, p.id, e.what());
      }
      p.peak_low_tflops = peak_tflops(low, p.train.precision);
      if (!(p.peak_low_tflops < peak_tflops(gpu, p.train.precision)))
        user_error(
            "{}: run '{}', peak_low_gpu '{}': its peak ({} TFLOP/s) must be below the file's GPU "
            "'{}' ({} TFLOP/s)",
            path, p.id, p.peak_low_gpu, p.peak_low_tflops, gpu.name,
            peak_tflops(gpu, p.train.precision));
    }
    check_layout(p.model, p.train, p.layout, p.cluster);  // a UserError names the degrees
    runs.push_back(std::move(p));
  }
  return runs;
}

double predicted_metric(const PublishedRun& run, const PlanResult& p) {
  if (run.metric == "tokens_per_s_per_gpu") return p.tokens_per_s / run.layout.gpus();
  if (run.metric == "model_tflops_per_gpu") return p.tflops_per_gpu;
  return p.time.step();
}

namespace {

double error_at(const PublishedRun& run, const GpuSpec& gpu) {
  Cluster c = run.cluster;
  c.gpu = gpu;
  if (run.mem_bw_gbs > 0) c.gpu.mem_bw_gbs = run.mem_bw_gbs;
  const PlanResult p = predict(run.model, run.train, run.layout, c);
  const double ratio = predicted_metric(run, p) / run.reported;
  return run.metric == "step_s" ? 1.0 / ratio - 1.0 : ratio - 1.0;  // a speed ratio either way
}

}  // namespace

std::pair<double, double> relative_error_range(const PublishedRun& run, const GpuSpec& gpu) {
  const double high = error_at(run, gpu);
  if (run.peak_low_tflops <= 0) return {high, high};
  // The same kernels at the lower peak: every dense rate scales with the clock.
  GpuSpec low = gpu;
  const double scale = run.peak_low_tflops / peak_tflops(gpu, run.train.precision);
  low.tflops_fp32 *= scale;
  low.tflops_bf16 *= scale;
  low.tflops_fp16 *= scale;
  return {error_at(run, low), high};
}

double relative_error(const PublishedRun& run, const GpuSpec& gpu) {
  const auto [low, high] = relative_error_range(run, gpu);
  if (low <= 0 && high >= 0) return 0.0;
  return std::abs(low) < std::abs(high) ? low : high;
}

}  // namespace braid::plan
