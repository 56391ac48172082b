// braid run config -> planner inputs (the model, the step and the rank layout).
#include "launch/plan/config_input.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "launch/config/config.h"
#include "launch/plan/stage_cost.h"

namespace braid::plan {

std::vector<int> braid_virtual_stage_blocks(const RunConfig& cfg, const TrainOptions& t,
                                            int num_virtual) {
  const std::vector<int>& split = cfg.parallel.pp_split;
  if (!split.empty() || num_virtual == 1 || cfg.model.n_layer < num_virtual) return split;
  return balanced_stage_blocks(cfg.model, t, num_virtual);
}

ConfigPlanInput plan_input_from_run_config(const RunConfig& cfg) {
  ConfigPlanInput in;
  in.model = cfg.model;
  Layout& l = in.layout;
  in.dp_auto = cfg.parallel.dp_degree() == 0;
  l.dp = in.dp_auto ? 1 : cfg.parallel.dp_degree();
  l.tp = cfg.parallel.tp;
  l.pp = cfg.parallel.pp;
  const std::string& sch = cfg.parallel.schedule;
  if (sch == "interleaved-1f1b") {
    l.schedule = "interleaved";
    l.vp = cfg.parallel.virtual_stages;
  } else if (sch == "gpipe" || sch == "1f1b") {
    l.schedule = sch;
  } else if (l.pp > 1) {
    in.schedule_error = fmt::format(
        "parallel.schedule {} is not modelled by the planner (it models gpipe, 1f1b and "
        "interleaved-1f1b)",
        sch);
  }
  TrainOptions& t = in.train;
  t.micro_batch = cfg.data.micro_batch;
  t.seq = cfg.data.seq_len;
  t.global_batch = static_cast<int64_t>(cfg.data.micro_batch) * cfg.data.grad_accum * l.dp;
  // The run's compute dtype (activations, 16-bit weights); gradients, masters and the update
  // stay f32 (optim/mixed_precision.h).
  t.precision = cfg.train.precision;
  t.grad_precision = Precision::FP32;
  t.optimizer = cfg.optim.name;
  t.zero = 0;
  t.checkpointing = cfg.train.checkpointing;
  t.flash_attention = true;  // attention_forward keeps only the log-sum-exp per row
  t.dropout = 0;             // braid's models have no dropout
  t.sequence_parallel = cfg.parallel.sequence_parallel;  // no effect at tp = 1
  t.grads_in_buckets = true;  // parallel/grad_buckets.h: gradients are views of the buckets
  // braid posts its pipeline receives early and sends asynchronously, but its multi-rank CPU
  // runs measured more exposed communication than every transfer (docs/plan.md): all counted.
  t.pp_overlap = false;
  if (l.pp > 1) {
    const int nv = l.pp * l.vp;
    const std::vector<int> v = braid_virtual_stage_blocks(cfg, t, nv);
    if (static_cast<int>(v.size()) == nv) {
      t.stage_blocks.assign(static_cast<size_t>(l.pp), 0);
      for (int vs = 0; vs < nv; ++vs) t.stage_blocks[static_cast<size_t>(vs % l.pp)] += v[vs];
    }
  }
  return in;
}

ConfigPlanInput load_plan_config(const std::string& path,
                                 const std::vector<std::string>& overrides) {
  return plan_input_from_run_config(load_run_config(path, overrides));
}

RunLayout read_run_layout(const std::string& run_dir) {
  RunLayout r;
  r.path = (std::filesystem::path(run_dir) / "run.json").string();
  std::ifstream in(r.path);
  if (!in)
    user_error("--compare: cannot open '{}'; give the directory of a braid train run", r.path);
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, false);
  if (j.is_discarded() || !j.contains("attempts") || !j["attempts"].is_array() ||
      j["attempts"].empty())
    user_error("--compare: '{}' is not a braid run record (no \"attempts\")", r.path);
  const nlohmann::json& a = j["attempts"].back();
  if (!a.contains("parallel_layout") || !a["parallel_layout"].is_object())
    user_error("--compare: the last attempt in '{}' has no parallel_layout", r.path);
  const nlohmann::json& p = a["parallel_layout"];
  try {
    r.ranks = p.value("ranks", 1);
    r.dp = p.value("dp", 1);
    r.tp = p.value("tp", 1);
    r.pp = p.value("pp", 1);
    r.zero = p.value("zero", 0);
    r.threads = a.value("threads", 0);
    if (a.contains("devices") && a["devices"].is_array() && !a["devices"].empty()) {
      r.device_detail = a["devices"][0].value("device", "");
      if (r.device_detail.starts_with("cuda")) r.device = "cuda";
    }
  } catch (const std::exception&) {
    user_error("--compare: '{}': parallel_layout has a value of the wrong type", r.path);
  }
  if (r.dp < 1 || r.tp < 1 || r.pp < 1 || r.ranks != r.dp * r.tp * r.pp)
    user_error("--compare: '{}': parallel_layout ranks {} is not dp {} x tp {} x pp {}", r.path,
               r.ranks, r.dp, r.tp, r.pp);
  return r;
}

void apply_run_layout(ConfigPlanInput& in, const RunLayout& run) {
  in.train.zero = run.zero;  // optim.zero 1: AdamW state sharded over dp (ZeRO-1)
  const int64_t per_replica = in.train.global_batch / in.layout.dp;
  in.layout.dp = run.dp;
  in.layout.tp = run.tp;
  in.layout.pp = run.pp;
  in.train.global_batch = per_replica * run.dp;
}

}  // namespace braid::plan
