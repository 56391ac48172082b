// `braid plan`: memory, time and layout planning from the command line.
#include "launch/plan/plan_command.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>

#include "core/error.h"
#include "launch/plan/calibrate_report.h"
#include "launch/plan/compare.h"
#include "launch/plan/config_input.h"
#include "launch/plan/cpu_model.h"
#include "launch/plan/fit_advice.h"
#include "launch/plan/gpu_profile.h"
#include "launch/plan/gpu_table.h"
#include "launch/plan/inference.h"
#include "launch/plan/memory_model.h"
#include "launch/plan/presets.h"
#include "launch/plan/report.h"
#include "launch/plan/search.h"
#include "launch/plan/time_model.h"

namespace braid {

namespace {

struct PlanArgs {
  plan::Calibrator calibrator;
  std::string preset, config, family = "llama";
  std::vector<std::string> overrides;  // --set, applied to --config
  // Training options typed on the command line win over the ones a --config implies.
  CLI::Option *opt_global_batch = nullptr, *opt_micro_batch = nullptr, *opt_seq = nullptr,
              *opt_precision = nullptr, *opt_grad_precision = nullptr, *opt_optimizer = nullptr;
  int layers = 0, hidden = 0, heads = 0, kv_heads = 0, ffn = 0, vocab = 0, seq = 0;
  plan::TrainOptions train;  // its enums come from the strings below
  std::string precision = "bf16", grad_precision = "fp32";
  std::string checkpointing = "none", attention = "flash", dropout = "auto";
  bool no_sp = false, no_dp_overlap = false;
  std::string dp_overlap = "on", tp_overlap = "off", param_gather_overlap = "on", tie = "auto";
  bool check = false;
  CLI::Option *opt_nodes = nullptr, *opt_gpus_per_node = nullptr;
  // A config's layout (parallel.dp/tp/pp, schedule) is used unless these are typed.
  CLI::Option *opt_dp = nullptr, *opt_tp = nullptr, *opt_pp = nullptr, *opt_vp = nullptr,
              *opt_schedule = nullptr, *opt_zero = nullptr;
  std::string currency = "USD", price_source;
  std::string lora_targets = "q,v";
  bool lora = false;                // --lora: rank 16 unless --lora-rank says
  std::string base_quant = "none";  // --base-quant: none, int8 or nf4 (lora.base_quant's names)
  std::string gpu = "h100-sxm", device_profile;
  int gpus_per_node = 0, nodes = 1;
  double intra_bw = 0, inter_bw = 0, price = 0;
  std::string layout = "manual";
  plan::Layout lay;
  bool inference = false;
  std::string serve_dtype = "fp16";
  int64_t context = 0, batch = 1;
  bool calibrate = false;
  std::string calibrate_device = "cpu";
  CLI::Option* opt_device = nullptr;
  std::string compare;
  double calibrate_seconds = 0;
  int calibrate_rounds = 0;
  std::string out = "device_profile.json";
  bool json = false;
};

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t end = s.find(',', start);
    const std::string item =
        s.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (!item.empty()) out.push_back(item);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

// The value of a command-line option that takes a config enum's spellings.
template <ConfigEnum E>
E enum_option(const char* option, const std::string& value) {
  if (const std::optional<E> v = enum_from_name<E>(value)) return *v;
  user_error("{} '{}' is unknown; expected {}", option, value, enum_choices<E>());
}

ModelConfig resolve_model(const PlanArgs& a, const plan::ConfigPlanInput* from_config) {
  const bool explicit_sizes = a.layers > 0 || a.hidden > 0 || a.heads > 0;
  const int sources = !a.preset.empty() + !a.config.empty() + explicit_sizes;
  if (sources == 0)
    user_error(
        "no model given; use --model <preset>, --config <file.yaml>, or --layers "
        "--hidden --heads (see `braid plan --help`)");
  if (sources > 1) user_error("give the model one way only: --model, --config, or explicit sizes");
  ModelConfig m;
  if (!a.preset.empty())
    m = plan::find_preset(a.preset);
  else if (from_config)
    m = from_config->model;
  else {
    if (a.layers <= 0 || a.hidden <= 0 || a.heads <= 0)
      user_error("explicit sizes need --layers, --hidden and --heads (all > 0)");
    m.family = a.family;
    m.n_layer = a.layers;
    m.n_embd = a.hidden;
    m.n_head = a.heads;
    m.n_kv_head = a.kv_heads;
    m.ffn_hidden = a.ffn;
    if (a.vocab > 0) m.vocab_size = a.vocab;
  }
  if (a.tie == "on")
    m.tie_embeddings = true;
  else if (a.tie == "off")
    m.tie_embeddings = false;
  else if (a.tie != "auto")
    user_error("--tie-embeddings '{}' is unknown; expected auto, on or off", a.tie);
  if (from_config) {
    // --seq with a config sets the training length (below), like data.seq_len.
  } else if (a.seq > 0 && (m.is_llama() || a.seq <= m.context_length || explicit_sizes))
    m.context_length = a.seq;
  else if (a.seq > 0)
    user_error("--seq {} exceeds the gpt2 position table ({})", a.seq, m.context_length);
  try {
    m.validate();
  } catch (const ConfigError& e) {
    user_error("model.{}: {}", e.key(), e.what());
  }
  return m;
}

plan::TrainOptions resolve_train(const PlanArgs& a, const plan::ConfigPlanInput* from_config) {
  plan::TrainOptions t = a.train;
  t.precision = enum_option<Precision>("--precision", a.precision);
  t.grad_precision = enum_option<Precision>("--grad-precision", a.grad_precision);
  t.checkpointing = enum_option<Checkpointing>("--checkpointing", a.checkpointing);
  if (from_config) {
    // The config's training step, unless an option was typed on the command line.
    const plan::TrainOptions& f = from_config->train;
    auto given = [](const CLI::Option* o) { return o && o->count() > 0; };
    if (!given(a.opt_global_batch)) t.global_batch = f.global_batch;
    if (!given(a.opt_micro_batch)) t.micro_batch = f.micro_batch;
    if (!given(a.opt_precision)) t.precision = f.precision;
    if (!given(a.opt_grad_precision)) t.grad_precision = f.grad_precision;
    if (!given(a.opt_optimizer)) t.optimizer = f.optimizer;
    if (!given(a.opt_zero)) t.zero = f.zero;
    t.grads_in_buckets = f.grads_in_buckets;
    t.sequence_parallel = f.sequence_parallel;
    t.stage_blocks = f.stage_blocks;  // the run's pipeline split (used while pp matches)
    t.seq = given(a.opt_seq) ? a.seq : f.seq;
  }
  if (a.attention != "flash" && a.attention != "standard" && a.attention != "cudnn")
    user_error("--attention '{}' is unknown; expected flash, cudnn or standard", a.attention);
  t.flash_attention = a.attention != "standard";
  t.attention_kernel = a.attention == "cudnn" ? "cudnn" : "flash";
  if (a.dropout == "auto")
    t.dropout = -1;
  else if (a.dropout == "on")
    t.dropout = 1;
  else if (a.dropout == "off")
    t.dropout = 0;
  else
    user_error("--dropout '{}' is unknown; expected auto, on or off", a.dropout);
  if (from_config && a.dropout == "auto") t.dropout = 0;  // braid's models have no dropout
  // From a config: its parallel.sequence_parallel (copied above); --no-sp turns it off.
  if (a.no_sp) t.sequence_parallel = false;
  auto on_off = [](const std::string& v, const char* opt) {
    if (v == "on") return true;
    if (v == "off") return false;
    user_error("{} '{}' is unknown; expected on or off", opt, v);
  };
  t.dp_overlap = on_off(a.dp_overlap, "--dp-overlap") && !a.no_dp_overlap;
  t.tp_overlap = on_off(a.tp_overlap, "--tp-overlap");
  t.param_gather_overlap = on_off(a.param_gather_overlap, "--param-gather-overlap");
  t.lora_targets = split_commas(a.lora_targets);
  if (t.lora_rank < 0) user_error("--lora-rank is {}; expected >= 0", t.lora_rank);
  if (a.lora && t.lora_rank == 0) t.lora_rank = 16;
  if (a.base_quant != "none") {
    BRAID_USER_CHECK(a.base_quant == "int8" || a.base_quant == "nf4",
                     "--base-quant is '{}'; expected none, int8 or nf4", a.base_quant);
    BRAID_USER_CHECK(t.lora_rank > 0,
                     "--base-quant {} quantises a LoRA run's frozen base; add --lora (or "
                     "--lora-rank N)",
                     a.base_quant);
    t.lora_base = a.base_quant;  // nf4: 4 bits + 0.127 bits of double-quantised constants
  }
  if (t.global_batch < 1) user_error("--global-batch is {}; expected >= 1", t.global_batch);
  return t;
}

// `config_ranks`: the ranks of a --config's layout (0 without a config).
plan::Cluster resolve_cluster(const PlanArgs& a, int config_ranks) {
  plan::Cluster c;
  plan::DeviceProfile d;
  if (a.device_profile.find(',') != std::string::npos) {
    std::vector<plan::DeviceProfile> profiles;
    for (const std::string& p : split_commas(a.device_profile))
      profiles.push_back(plan::load_device_profile(p));
    d = plan::average_profiles(profiles);
  } else {
    d = plan::find_device(a.device_profile.empty() ? a.gpu : a.device_profile);
  }
  c.gpu = d.gpu;
  c.cpu = d.cpu;
  c.gpus_per_node = a.gpus_per_node > 0 ? a.gpus_per_node : c.gpu.gpus_per_node;
  // A braid run config describes its own ranks (one process unless parallel.* says more):
  // unless the cluster is given, plan it on one node of exactly those.
  const bool cluster_given = (a.opt_nodes && a.opt_nodes->count() > 0) ||
                             (a.opt_gpus_per_node && a.opt_gpus_per_node->count() > 0);
  if (config_ranks > 0 && !cluster_given) c.gpus_per_node = config_ranks;
  if (a.nodes < 1) user_error("--nodes is {}; expected >= 1", a.nodes);
  c.nodes = a.nodes;
  c.intra_bw_gbs = a.intra_bw > 0 ? a.intra_bw : c.gpu.intra_bw_gbs;
  c.inter_bw_gbs = a.inter_bw > 0 ? a.inter_bw : c.gpu.inter_bw_gbs;
  c.price_per_gpu_hour = a.price;
  c.currency = a.currency;
  c.price_source = a.price_source;
  if (a.price < 0) user_error("--price is {}; expected >= 0", a.price);
  return c;
}

bool typed(const CLI::Option* o) { return o && o->count() > 0; }

// The layout of a --config (parallel.dp/tp/pp, schedule), with the options typed on the
// command line winning.
plan::Layout config_layout(const PlanArgs& a, const plan::ConfigPlanInput& in) {
  plan::Layout l = in.layout;
  if (typed(a.opt_dp)) l.dp = a.lay.dp;
  if (typed(a.opt_tp)) l.tp = a.lay.tp;
  if (typed(a.opt_pp)) l.pp = a.lay.pp;
  if (typed(a.opt_vp)) l.vp = a.lay.vp;
  if (typed(a.opt_schedule)) l.schedule = a.lay.schedule;
  l.cp = a.lay.cp;
  // parallel.dp auto on a cluster typed on the command line: fill it, as without a config.
  const bool cluster_given = typed(a.opt_nodes) || typed(a.opt_gpus_per_node);
  if (in.dp_auto && !typed(a.opt_dp) && cluster_given) l.dp = 0;
  if (!typed(a.opt_schedule) && !in.schedule_error.empty() && l.pp > 1)
    user_error("{}: {}; give --schedule to plan another", a.config, in.schedule_error);
  return l;
}

// --compare: `given` (the --config, or the run's own config.yaml) takes the layout the run
// ran on (run.json); a --config or layout options that describe another run are refused.
void compare_layout(const PlanArgs& a, const std::string& run_config, const plan::RunLayout& run,
                    plan::ConfigPlanInput& given) {
  if (given.dp_auto) {  // parallel.dp auto: the run's dp
    given.train.global_batch = given.train.global_batch / given.layout.dp * run.dp;
    given.layout.dp = run.dp;
    given.dp_auto = false;
  }
  auto refuse = [&](const char* what, int ours, int theirs, const std::string& from) {
    if (ours != theirs)
      user_error("--compare: {} is {} in {} but the run ran {}={} ({})", what, ours, from, what,
                 theirs, run.path);
  };
  refuse("parallel.dp", given.layout.dp, run.dp, a.config);
  refuse("parallel.tp", given.layout.tp, run.tp, a.config);
  refuse("parallel.pp", given.layout.pp, run.pp, a.config);
  auto refuse_option = [&](const char* what, const CLI::Option* o, int ours, int theirs) {
    if (typed(o) && ours != theirs)
      user_error("--compare: --{} {} but the run ran {}={} ({}); drop --{}", what, ours, what,
                 theirs, run.path, what);
  };
  refuse_option("dp", a.opt_dp, a.lay.dp, run.dp);
  refuse_option("tp", a.opt_tp, a.lay.tp, run.tp);
  refuse_option("pp", a.opt_pp, a.lay.pp, run.pp);
  if (a.config != run_config && std::filesystem::exists(run_config)) {
    plan::ConfigPlanInput ran = plan::load_plan_config(run_config, {});
    plan::apply_run_layout(ran, run);
    plan::check_same_step(ran, given, run_config, a.config);
  }
  plan::apply_run_layout(given, run);
}

void run_plan(const PlanArgs& given) {
  PlanArgs a = given;
  // --compare predicts the run's own step: without a model source, its resolved config.yaml.
  const std::string run_config =
      a.compare.empty() ? "" : (std::filesystem::path(a.compare) / "config.yaml").string();
  const bool explicit_sizes = a.layers > 0 || a.hidden > 0 || a.heads > 0;
  if (!a.compare.empty() && (a.inference || a.layout == "auto"))
    user_error(
        "--compare sets a prediction beside a braid train run as it ran; it does not combine with "
        "{}",
        a.inference ? "--inference" : "--layout auto");
  if (!a.compare.empty() && a.config.empty() && a.preset.empty() && !explicit_sizes) {
    if (!std::filesystem::exists(run_config))
      user_error(
          "--compare: '{}' is missing; give the run directory of a braid train run, or --config",
          run_config);
    a.config = run_config;
  }
  if (a.calibrate) {
    if (!a.calibrator)
      user_error("--calibrate is not available in this program (it is part of the braid binary)");
    const Device device = plan::parse_calibrate_device(a.calibrate_device);
    plan::CalibrateOptions copt = device.is_cpu()
                                      ? plan::CalibrateOptions{}
                                      : plan::CalibrateOptions::gpu(a.calibrate_device);
    if (a.calibrate_seconds > 0) copt.total_seconds = a.calibrate_seconds;
    if (a.calibrate_rounds > 0) copt.rounds = a.calibrate_rounds;
    const plan::CalibrationRun run = a.calibrator(copt);
    plan::save_device_profile(run.profile, a.out);
    if (a.json)
      std::cout << plan::load_device_profile(a.out).gpu.name << "\n";
    else
      std::cout << plan::calibration_text(run, copt, a.out);
    return;
  }
  if (typed(a.opt_device))
    user_error("--device {} names what --calibrate measures; add --calibrate (a plan's device is "
               "--gpu or --device-profile)",
               a.calibrate_device);
  if (!a.overrides.empty() && a.config.empty())
    user_error("--set applies to a --config file; give --config <file.yaml> too");
  std::unique_ptr<plan::ConfigPlanInput> from_config;
  if (!a.config.empty())
    from_config =
        std::make_unique<plan::ConfigPlanInput>(plan::load_plan_config(a.config, a.overrides));
  // --compare: the layout the run ran on (run.json), checked against --config and the options.
  plan::RunLayout run_layout;
  plan::MeasuredRun run;
  if (!a.compare.empty() && from_config) {
    run = plan::read_run_metrics(a.compare);  // first: a directory without metrics is no run
    run_layout = plan::read_run_layout(a.compare);
    compare_layout(a, run_config, run_layout, *from_config);
  }
  const ModelConfig m = resolve_model(a, from_config.get());
  plan::Layout l = a.lay;
  if (from_config) l = config_layout(a, *from_config);
  const plan::Cluster c =
      resolve_cluster(a, from_config ? std::max(1, l.dp) * l.tp * l.pp * l.cp : 0);
  if (a.inference) {
    const int64_t ctx = a.context > 0 ? a.context : m.context_length;
    const plan::InferenceResult r =
        plan::predict_inference(m, c.gpu, a.lay.tp, a.serve_dtype, ctx, a.batch);
    if (a.json)
      std::cout << plan::inference_json(r).dump(2) << "\n";
    else
      std::cout << plan::inference_text(m, c, r);
    if (a.check && !r.fits)
      user_error("--check: the model does not fit for serving on {}", c.gpu.name);
    return;
  }
  plan::TrainOptions t = resolve_train(a, from_config.get());
  if (a.layout == "auto") {
    const plan::SearchResult s = plan::search_layouts(m, t, c);
    if (a.json)
      std::cout << plan::search_json(s).dump(2) << "\n";
    else {
      if (!s.best.empty()) std::cout << plan::plan_text(m, c, s.best.front().plan) << "\n";
      std::cout << plan::search_text(s);
    }
    if (a.check && s.best.empty()) user_error("--check: no layout fits");
    return;
  }
  if (a.layout != "manual")
    user_error("--layout '{}' is unknown; expected auto or manual", a.layout);
  if (l.dp == 0) {  // fill the cluster
    const int rest = c.total_gpus() / (l.tp * l.pp * l.cp);
    l.dp = rest > 0 ? rest : 1;
  }
  if (l.vp > 1 && l.schedule == "1f1b") l.schedule = "interleaved";
  plan::PlanResult r = plan::predict(m, t, l, c);
  if (!r.fits)
    r.fit_hints = plan::fit_hints(m, t, l, c);
  else if (a.compare.empty())
    r.largest_micro_batch = plan::fit_advice(m, t, l, c).largest_micro_batch;
  if (!a.compare.empty()) {
    if (!from_config)
      user_error(
          "--compare predicts a braid train run: give its config with --config (or nothing: the "
          "run's "
          "config.yaml is used), not --model or explicit sizes");
    if (!r.kernel_model)
      user_error(
          "--compare needs a calibrated profile: add --device-profile <file from braid plan "
          "--calibrate>");
    // Rank 0's kernel groups: under pp it runs stage 0 (its blocks of the run's split, no LM
    // head), not the slowest stage.
    plan::PlanResult groups = r;
    if (l.pp > 1) {
      const double layers0 = plan::stage_blocks_of(t, m.n_layer, l.pp, 0);
      const plan::CpuStepTime k = plan::cpu_microbatch_time(m, t, c.cpu, layers0, false, l.tp);
      const double mbs = r.micro_batches;
      groups.cpu_kernels = {k.gemm * mbs,           k.attention * mbs,  k.lm_head * mbs,
                            k.elementwise * mbs,    k.activation * mbs, k.calls * mbs,
                            r.cpu_kernels.optimizer};
    }
    // Rank 0, which writes the metrics, is stage 0 (ranks are ordered tp, pp, dp).
    const plan::MemoryBreakdown rank0 = plan::stage_memory(m, t, l, c.gpu, 0);
    std::string note;
    for (const std::string& p : split_commas(a.device_profile))
      note += plan::check_same_device(plan::find_device(p), p, run_layout);
    if (run_layout.device == "cpu" && run_layout.threads > 0 && c.cpu.threads > 0 &&
        run_layout.threads != c.cpu.threads)
      note += fmt::format(
          "note: the profile was calibrated on {} threads, the run's ranks ran {} each ({}); "
          "calibrate with OMP_NUM_THREADS={}\n",
          c.cpu.threads, run_layout.threads, run_layout.path, run_layout.threads);
    if (a.json) {
      nlohmann::json j = plan::plan_json(r);
      j["compare"] = plan::compare_json(groups, run);
      j["compare"]["ranks"] = plan::compare_ranks_json(r, rank0, run);
      if (!note.empty()) j["compare"]["note"] = note;
      std::cout << j.dump(2) << "\n";
    } else {
      std::cout << plan::plan_text(m, c, r) << plan::compare_text(groups, run)
                << plan::compare_ranks_text(r, rank0, run) << note;
    }
    return;
  }
  if (a.json)
    std::cout << plan::plan_json(r).dump(2) << "\n";
  else
    std::cout << plan::plan_text(m, c, r);
  if (a.check && !r.fits)
    user_error("--check: the plan does not fit ({:.2f} GiB per GPU needed, {:.2f} GiB available)",
               r.memory.total() / (1024.0 * 1024 * 1024),
               r.capacity_bytes / (1024.0 * 1024 * 1024));
}

}  // namespace

void add_plan_command(CLI::App& app, plan::Calibrator calibrate) {
  auto args = std::make_shared<PlanArgs>();
  PlanArgs& a = *args;
  a.calibrator = std::move(calibrate);
  a.lay.dp = 0;
  auto* c = app.add_subcommand("plan", "Plan memory, time, layout and cost of a training run");
  c->add_option("--model", a.preset, "Model preset (gpt2-124m ... llama-70b, qwen-72b, gpt3-175b)");
  c->add_option(
      "--config", a.config,
      "A braid run config (YAML): its model and the step `braid train` runs on one process\n"
      "(data.micro_batch x data.grad_accum sequences of data.seq_len, fp32, AdamW);\n"
      "training options typed here win");
  c->add_option("--set", a.overrides, "Override a --config key, section.key=value (repeatable)")
      ->type_name("KEY=VALUE");
  c->add_option("--family", a.family, "Family of explicit sizes: gpt2 or llama");
  c->add_option("--layers", a.layers, "Explicit size: transformer blocks");
  c->add_option("--hidden", a.hidden, "Explicit size: hidden width");
  c->add_option("--heads", a.heads, "Explicit size: attention heads");
  c->add_option("--kv-heads", a.kv_heads, "Explicit size: key/value heads (0: heads)");
  c->add_option("--ffn", a.ffn, "Explicit size: MLP width (0: family default)");
  c->add_option("--vocab", a.vocab, "Explicit size: vocabulary");
  a.opt_seq = c->add_option(
      "--seq", a.seq,
      "Training sequence length (default: data.seq_len of --config, else the model's context)");
  a.opt_global_batch =
      c->add_option("--global-batch", a.train.global_batch, "Sequences per optimizer step");
  a.opt_micro_batch =
      c->add_option("--micro-batch", a.train.micro_batch, "Sequences per micro-batch");
  a.opt_precision =
      c->add_option("--precision", a.precision, "Compute precision: fp32, bf16 or fp16");
  a.opt_grad_precision =
      c->add_option("--grad-precision", a.grad_precision, "Gradient dtype: fp32 (braid) or bf16");
  a.opt_optimizer = c->add_option("--optimizer", a.train.optimizer, "adamw, adamw8bit or sgd");
  a.opt_zero = c->add_option(
      "--zero", a.train.zero,
      "ZeRO stage: 0, 1 (optimizer state), 2 (+ gradients), 3 (+ weights) sharded over dp x cp");
  c->add_option("--checkpointing", a.checkpointing,
                "none, full or selective (Megatron-LM's: the attention core recomputed)");
  c->add_option(
      "--attention", a.attention,
      "flash (FlashAttention-2 class: no s^2 activations), cudnn (cuDNN fused attention or\n"
      "FlashAttention-3, as Transformer Engine runs on Hopper: faster there) or standard");
  c->add_option("--dropout", a.dropout, "auto (gpt2 on, llama off), on, off");
  c->add_flag("--no-sequence-parallel", a.no_sp, "Keep norm/dropout activations whole on TP ranks");
  c->add_flag("--no-dp-overlap", a.no_dp_overlap, "Same as --dp-overlap off");
  c->add_option(
      "--dp-overlap", a.dp_overlap,
      "on (default, as torch DDP): gradient reduction hidden behind the last backward; off");
  c->add_option(
      "--tp-overlap", a.tp_overlap,
      "on: TP collectives hidden behind the layer's GEMMs; off (default, as Megatron-LM)");
  c->add_option("--param-gather-overlap", a.param_gather_overlap,
                "on (default, as FSDP's prefetch): ZeRO-2/3 parameter all-gathers hidden behind "
                "compute; off");
  c->add_option("--zero3-prefetch", a.train.zero3_prefetch,
                "ZeRO-3: units (blocks) gathered ahead of the one computing (default 1, as FSDP's\n"
                "prefetch); their whole weights count as working memory beside the shards")
      ->check(CLI::Range(0, 64));
  c->add_option("--tie-embeddings", a.tie,
                "auto (family default: gpt2 tied, llama untied), on, off (separate LM head)");
  c->add_option(
      "--mfu", a.train.stated_mfu,
      "Also time 6*N*D FLOPs at this fraction of peak (e.g. 0.4), without the efficiency model");
  c->add_option("--lora-rank", a.train.lora_rank, "LoRA rank (0: full training)");
  c->add_option("--lora-targets", a.lora_targets, "LoRA targets: q,k,v,o,gate,up,down or all");
  c->add_option("--lora-base", a.train.lora_base, "Frozen base weights: bf16, int8, 4bit");
  c->add_flag("--lora", a.lora, "LoRA fine-tuning at rank 16 (unless --lora-rank says)");
  c->add_option("--base-quant", a.base_quant,
                "LoRA base quantised as lora.base_quant: none, int8 or nf4 (QLoRA: 4 bits plus\n"
                "0.127 bits of double-quantised block constants); sets --lora-base")
      ->capture_default_str();
  c->add_option("--train-tokens", a.train.train_tokens, "Tokens to train for time and cost");
  c->add_option("--gpu", a.gpu,
                "GPU kind (v100, a100-40gb, a100-80gb, h100-sxm, ...) or profile.json");
  c->add_option("--device-profile", a.device_profile,
                "Device profile JSON from --calibrate; its kernel rates time braid's CPU step.\n"
                "Several, comma-separated (calibrated before and after a run): their mean");
  c->add_option(
      "--compare", a.compare,
      "A braid train run directory: predict its step (from its config.yaml, or --config)\n"
      "and set its measured step and kernel-group times (metrics.jsonl) beside the\n"
      "prediction (needs a --device-profile from --calibrate)");
  a.opt_gpus_per_node = c->add_option("--gpus-per-node", a.gpus_per_node,
                                      "GPUs per node (default: per GPU kind; 1 with --config)");
  a.opt_nodes = c->add_option("--nodes", a.nodes, "Nodes");
  c->add_option("--intra-bw", a.intra_bw, "Override intra-node GB/s per GPU and direction");
  c->add_option("--inter-bw", a.inter_bw, "Override inter-node GB/s per GPU");
  c->add_option("--price", a.price, "Price per GPU-hour for the cost estimate (in --currency)");
  c->add_option("--currency", a.currency, "Currency of --price (default USD)");
  c->add_option("--price-source", a.price_source,
                "Where --price comes from (printed beside the cost)");
  c->add_flag("--check", a.check,
              "Exit non-zero (1) when the plan does not fit (for scripts and CI)");
  c->add_option("--layout", a.layout, "manual (use --dp/--tp/--pp) or auto (search)");
  a.opt_dp = c->add_option(
      "--dp", a.lay.dp,
      "Data-parallel degree (default: a --config's parallel.dp, else fill the cluster)");
  a.opt_tp = c->add_option("--tp", a.lay.tp, "Tensor-parallel degree (default: a --config's)");
  a.opt_pp = c->add_option("--pp", a.lay.pp, "Pipeline stages (default: a --config's)");
  c->add_option("--cp", a.lay.cp,
                "Context-parallel degree: each sequence split over cp ranks (ring attention)");
  a.opt_vp =
      c->add_option("--vp", a.lay.vp, "Virtual stages per pipeline rank (interleaved schedule)");
  a.opt_schedule = c->add_option("--schedule", a.lay.schedule, "gpipe, 1f1b or interleaved");
  c->add_flag("--inference", a.inference, "Serving memory and decode rate instead of training");
  c->add_option("--serve-dtype", a.serve_dtype, "Serving weights: fp16, bf16, int8, int4");
  c->add_option("--context", a.context, "Serving context length (default: model context)");
  c->add_option("--batch", a.batch, "Serving batch (concurrent sequences)");
  c->add_flag("--calibrate", a.calibrate,
              "Measure this machine (GEMM, attention, LM head, element-wise and memory rates) and "
              "write a device profile; a GPU with --device cuda");
  a.opt_device = c->add_option(
      "--device", a.calibrate_device,
      "What --calibrate measures: cpu (default), cuda or cuda:N (a GPU: braid's CUDA kernels,\n"
      "cuBLASLt GEMMs and device memory bandwidth, at GPU-sized shapes)");
  c->add_option("--out", a.out, "Where --calibrate writes the profile");
  c->add_option(
       "--calibrate-seconds", a.calibrate_seconds,
       "Wall-clock seconds the whole --calibrate may take (default 40, 20 on a GPU); below this\n"
       "machine's floor (one warm-up and one timed call of every probe) it takes the floor and\n"
       "says so")
      ->check(CLI::PositiveNumber);
  c->add_option("--calibrate-rounds", a.calibrate_rounds,
                "Interleaved rounds the probe time is split into (default 6)")
      ->check(CLI::Range(1, 1 << 30));
  c->add_flag("--json", a.json, "Print JSON instead of tables");
  c->callback([args] { run_plan(*args); });
}

}  // namespace braid
