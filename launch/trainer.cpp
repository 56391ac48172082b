// The training loop: resume, micro-batch accumulation, clipping, AdamW, metrics, evaluation,
// checkpoints and the closing sample.
#include "launch/trainer.h"

#include <omp.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/kernels/gemm.h"
#include "core/models/generate.h"
#include "core/profile.h"
#include "data/file_util.h"
#include "data/loader.h"
#include "data/shard.h"
#include "data/tokenizer.h"
#include "launch/checkpoint.h"
#include "launch/config.h"
#include "launch/config_json.h"
#include "launch/dist_run.h"
#include "launch/exec_setup.h"
#include "launch/lora_adapter.h"
#include "launch/memory_report.h"
#include "launch/metrics.h"
#include "launch/mixed_precision.h"
#include "launch/model_io.h"
#include "launch/model_passes.h"
#include "launch/peak_cache.h"
#include "launch/run_lock.h"
#include "launch/run_record.h"
#include "launch/signals.h"
#include "optim/adamw.h"
#include "optim/zero_adamw.h"
#include "parallel/grad_buckets.h"
#include "parallel/scalar_reduce.h"

namespace braid {

namespace fs = std::filesystem;

namespace {

// Seconds per step by kernel group, plus "other" (the rest of the step: data, allocation,
// framework glue), for metrics.jsonl.
nlohmann::json kernel_seconds_json(const KernelTimes& k, double step_time, int64_t steps) {
  nlohmann::json j = nlohmann::json::object();
  if (steps <= 0) return j;
  for (int g = 0; g < kKernelGroups; ++g)
    j[kernel_group_name(static_cast<KernelGroup>(g))] = k.seconds[g] / static_cast<double>(steps);
  j["other"] = std::max(0.0, step_time - k.total()) / static_cast<double>(steps);
  return j;
}

// "time per step 0.412 s: gemm 0.281 (68%) | attention ..." for the end of a run.
std::string time_split_line(const KernelTimes& k, double step_time, int64_t steps) {
  const double per = step_time / static_cast<double>(steps);
  std::string line = fmt::format("time per step {:.4f} s:", per);
  auto part = [&](const char* name, double s) {
    const double v = s / static_cast<double>(steps);
    line += fmt::format(" {} {:.4f} ({:.0f}%) |", name, v, step_time > 0 ? 100.0 * s / step_time : 0.0);
  };
  for (int g = 0; g < kKernelGroups; ++g) part(kernel_group_name(static_cast<KernelGroup>(g)), k.seconds[g]);
  part("other", std::max(0.0, step_time - k.total()));
  line.pop_back();
  line.pop_back();
  return line;
}

// How long the start-up peak probe runs: the best 1024^3 GEMM rate seen in that time is the
// MFU denominator when train.peak_tflops is 0. On a shared or virtual machine whose speed
// drifts over seconds (docs/benchmarks.md, bench_drift), 0.5 s often saw only a slow spell and
// read MFU high (93 % in one quickstart run); 2 s of best-of is steadier.
constexpr double kPeakProbeSeconds = 2.0;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Live bytes by allocation category now (between steps: weights, gradients, optimizer state;
// activations are mostly back in the cache) and the allocator's cache, in MiB.
nlohmann::json memory_by_category_mib(const MemoryStats& s) {
  nlohmann::json j = nlohmann::json::object();
  for (size_t i = 0; i < s.live_bytes.size(); ++i)
    j[mem_category_name(static_cast<MemCategory>(i))] =
        static_cast<double>(s.live_bytes[i]) / 1048576.0;
  j["cached"] = static_cast<double>(s.cached_bytes) / 1048576.0;
  return j;
}

double peak_rss_mib() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;  // ru_maxrss is KiB on Linux
}

// First differing model key between a checkpoint's config and ours, or "".
std::string model_difference(const nlohmann::json& saved, const ModelConfig& ours) {
  const nlohmann::json now = fields_to_json(ours);
  for (auto it = now.begin(); it != now.end(); ++it) {
    if (!saved.contains(it.key()) || saved.at(it.key()) != it.value())
      return fmt::format("model.{} is {} in the checkpoint but {} in the config", it.key(),
                         saved.contains(it.key()) ? saved.at(it.key()).dump() : "absent",
                         it.value().dump());
  }
  return "";
}

double read_unigram_entropy(const std::string& meta_path) {
  try {  // read_json_file refuses pipes and deep nesting
    return read_json_file(meta_path, "meta.json").value("unigram_entropy_nats", -1.0);
  } catch (const std::exception&) {
    return -1.0;  // an unreadable meta.json only loses the baseline in the log
  }
}

// The manifest's `state`: everything besides the tensors that a resume needs.
nlohmann::json checkpoint_state(const RunConfig& cfg, int64_t done, int64_t optimizer_steps,
                                const MixedPrecision& mp, int dp, int zero) {
  nlohmann::json j = {{"model", fields_to_json(cfg.model)},
          // The layout that wrote it. The optimizer file always holds whole per-parameter
          // moments, so any DP size, with or without ZeRO-1, can load it.
          {"layout", {{"dp", dp}, {"tp", 1}, {"pp", 1}, {"zero", zero}}},
          {"optimizer_steps", optimizer_steps},
          {"data", {{"seed", cfg.data.seed}, {"next_step", done}}},
          // Training draws randomness only from counter-based streams (data windows from
          // (seed, step, micro), init from (seed, name)), so the seeds and the step are the
          // whole RNG state.
          {"rng",
           {{"kind", "counter"},
            {"data_seed", cfg.data.seed},
            {"init_seed", cfg.model.seed},
            {"counter", done}}},
          {"config_yaml", dump_run_config(cfg)}};
  if (mp.scaling()) j["loss_scaler"] = mp.state_json();
  return j;
}

// When to write a checkpoint after step `done`: every checkpoint.interval steps, at the end,
// when checkpoint.interval_minutes of training passed since the last one, or when asked to stop.
bool checkpoint_due(const CheckpointConfig& c, int64_t done, int64_t total, double minutes_since,
                    bool stopping) {
  if (stopping || done == total) return true;
  if (c.interval > 0 && done % c.interval == 0) return true;
  return c.interval_minutes > 0 && minutes_since >= c.interval_minutes;
}

double evaluate(ExecContext& ctx, Transformer& model, const ValidationSet& val, int batches) {
  double sum = 0.0;
  int64_t count = 0;
  const int64_t n = std::min<int64_t>(batches, val.num_batches());
  for (int64_t i = 0; i < n; ++i) {
    Batch b = val.val_batch(i);
    LossSum l = model.forward_loss(ctx, b.tokens, b.targets);
    sum += l.sum;
    count += l.count;
  }
  return count > 0 ? sum / static_cast<double>(count) : NAN;
}

// Gradient buckets over the DP group: all-reduce (sum, since every rank scales its loss by
// 1 / global tokens), or reduce-scatter for ZeRO-1.
std::unique_ptr<GradBuckets> make_buckets(ExecContext& ctx, Transformer& model,
                                          Communicator& dp, const RunConfig& cfg) {
  GradBucketOptions o;
  o.bucket_bytes = static_cast<int64_t>(cfg.parallel.bucket_mb * 1048576.0);
  o.first_bucket_bytes = static_cast<int64_t>(cfg.parallel.first_bucket_mb * 1048576.0);
  o.comm_dtype = cfg.parallel.allreduce_dtype_value();
  o.op = ReduceOp::Sum;
  o.reduce_scatter = cfg.optim.zero == 1;
  return std::make_unique<GradBuckets>(ctx, model.parameters(), dp, o);
}

// This rank's own log (logs/rank-N.log) in a multi-rank run; nothing for one process.
class RankLog {
 public:
  RankLog(const fs::path& run_dir, const DistRun* dist) {
    if (!dist) return;
    fs::create_directories(run_dir / "logs");
    out_.open(run_dir / "logs" / fmt::format("rank-{}.log", dist->rank()), std::ios::app);
    BRAID_USER_CHECK(out_.good(), "cannot write {}", (run_dir / "logs").string());
  }
  void line(const std::string& s) {
    if (out_.is_open()) out_ << fmt::format("[{:.3f}] {}", unix_time_now(), s) << std::endl;
  }

 private:
  std::ofstream out_;
};

}  // namespace

TrainSummary train(const RunConfig& cfg_in, const std::string& config_path, const DistRun* dist) {
  const auto t_start = std::chrono::steady_clock::now();
  std::unique_ptr<LoadedModel> init_base;  // lora.init_from's model, until copied in
  const RunConfig cfg = resolve_init_from(cfg_in, init_base);
  if (cfg.train.threads > 0) omp_set_num_threads(cfg.train.threads);
  const fs::path run_dir = fs::path(cfg.run.dir) / cfg.run.name;
  const fs::path data_dir = cfg.data.dir;
  const std::string train_path = (data_dir / "train.bin").string();
  const std::string val_path = (data_dir / "val.bin").string();
  const std::string tok_path = tokenizer_file_in(data_dir.string());  // "" when none

  // Data first: a bad shard fails before anything is written.
  {
    const TokenShard train_shard(train_path);  // validates header, size and every id
    check_shard_vocab(train_shard, cfg.model.vocab_size);
    BRAID_USER_CHECK(train_shard.size() > cfg.data.seq_len,
                     "{} holds {} tokens, fewer than one sequence of data.seq_len + 1 = {}",
                     train_path, train_shard.size(), cfg.data.seq_len + 1);
  }
  ValidationSet val(val_path, cfg.data);
  check_shard_vocab(val.shard(), cfg.model.vocab_size);

  // One rank's execution context: allocator, profiler and GEMM plan (launch/exec_setup.h).
  std::unique_ptr<ExecContext> ctx_owner = make_cpu_context(cfg.data.seed);
  ExecContext& ctx = *ctx_owner;
  // Data parallel: rank 0 (`lead`) alone prints, writes metrics, records and checkpoints.
  const bool lead = !dist || dist->rank() == 0;
  const int dp = dist ? dist->dp->size() : 1;
  const int dp_rank = dist ? dist->dp->rank() : 0;
  Transformer model(ctx, cfg.model);
  model.init_weights();
  apply_model_passes(model, cfg, init_base.get());  // init_from, LoRA, checkpointing
  init_base.reset();
  // Buckets bind the gradients first, so the f32 masters below share the bucket views.
  std::unique_ptr<GradBuckets> buckets;
  if (dp > 1) buckets = make_buckets(ctx, model, *dist->dp, cfg);
  // ZeRO-1 first: with bf16/fp16 it converts the trainable weights and keeps f32 masters of
  // its shard only, and MixedPrecision leaves those to it.
  std::unique_ptr<ZeroAdamW> opt_zero;
  if (buckets && cfg.optim.zero == 1)
    opt_zero = std::make_unique<ZeroAdamW>(ctx, *buckets, cfg.optim,
                                           precision_dtype(cfg.train.precision));
  // train.precision: bf16/fp16 compute weights, f32 masters for the optimizer (fp32: as is).
  MixedPrecision mp(ctx, model, cfg.train);
  if (opt_zero) mp.use_zero(*opt_zero);
  std::unique_ptr<AdamW> opt_plain;
  if (!opt_zero) opt_plain = std::make_unique<AdamW>(ctx, mp.optimizer_params(), cfg.optim);
  fs::create_directories(run_dir);
  std::optional<RunLock> run_lock;  // before anything in run_dir is read or written
  if (lead) run_lock.emplace(run_dir.string());
  RankLog rank_log(run_dir, dist);
  rank_log.line(fmt::format("rank {} of {} ({}), dp rank {} of {}, ZeRO {}",
                            dist ? dist->rank() : 0, dist ? dist->world->size() : 1,
                            dist ? dist->mesh.str() : "one process", dp_rank, dp,
                            opt_zero ? 1 : 0));
  const StopSignals stop;
  CheckpointManager ckpt(run_dir.string(), cfg.checkpoint.keep_last);

  // ---- resume ----
  int64_t start_step = 0;
  std::optional<std::string> resume_from;
  if (cfg.checkpoint.resume == "auto") {
    resume_from = ckpt.latest();
  } else if (cfg.checkpoint.resume == "none") {
    BRAID_USER_CHECK(!ckpt.latest().has_value(),
                     "{} already holds checkpoints and checkpoint.resume is none; use "
                     "checkpoint.resume=auto to continue it, or another run.name",
                     run_dir.string());
  } else {
    resume_from = cfg.checkpoint.resume;
  }
  if (resume_from) {
    LoadedCheckpoint ck = CheckpointManager::load(*resume_from);
    if (ck.state.contains("model")) {
      const std::string diff = model_difference(ck.state.at("model"), cfg.model);
      BRAID_USER_CHECK(diff.empty(), "cannot resume from {}: {}; the checkpoint was written for a "
                       "different model config", *resume_from, diff);
    }
    mp.load_weights(ck.model);
    if (ck.state.contains("loss_scaler")) mp.restore(ck.state.at("loss_scaler"));
    if (!ck.optimizer.names().empty()) {
      auto get = [&](const std::string& n) {
        check_tensor_matches(ck.optimizer, n, model.find_parameter(n.substr(0, n.rfind('.')))->value.shape(),
                             DType::F32, ck.optimizer.path());
        return ck.optimizer.get(n);
      };
      const int64_t steps = ck.state.value("optimizer_steps", ck.step);
      if (opt_zero)
        opt_zero->load_state(get, steps);
      else
        opt_plain->load_state(get, steps);
      start_step = ck.step;
    }
    const std::string msg = fmt::format("resumed from {} (step {})", *resume_from, ck.step);
    if (lead) std::printf("%s\n", msg.c_str());
    rank_log.line(msg);
  } else if (!cfg.run.init_from.empty()) {  // fine-tuning: weights from a run or HF directory
    mp.load_f32([&] { init_weights_from(model, cfg.run.init_from); });
    if (lead) std::printf("initialised from %s\n", cfg.run.init_from.c_str());
  }
  const ParallelLayout layout{dist ? dist->world->size() : 1, dp, 1, 1, opt_zero ? 1 : 0};
  // ---- the run record: config (kept across resumes), version and machine ----
  const MachineInfo machine = machine_info(ctx.gemm());
  if (lead) {
    const std::string config_warning = record_run_config(cfg, run_dir, start_step);
    if (!config_warning.empty()) std::printf("%s\n", config_warning.c_str());
    append_run_record(run_dir, machine, start_step, layout);
    if (!tok_path.empty()) fs::copy_file(tok_path, run_dir / kTokenizerFile, fs::copy_options::overwrite_existing);
  }

  const int64_t total = cfg.train.steps;
  const int B = cfg.data.micro_batch, T = cfg.data.seq_len, accum = cfg.data.grad_accum;
  // The global batch: dp x grad_accum x micro_batch sequences.
  const double tokens_per_step = static_cast<double>(B) * T * accum * dp;
  const double flops_per_step = cfg.model.flops_per_token(T) * tokens_per_step;
  // The MFU peak (a 2 s probe unless cached) only where MFU is reported.
  const PeakChoice peak_choice =
      lead ? choose_mfu_peak(ctx, cfg.train.peak_tflops, machine, kPeakProbeSeconds)
           : PeakChoice{1.0, "not measured on this rank"};
  const double peak = peak_choice.flops_per_s;
  if (lead) std::printf("braid train: %s, %s %.2fM params, %d threads, gemm %s, run dir %s\n",
              config_path.c_str(), cfg.model.family.c_str(), cfg.model.num_params() / 1e6,
              omp_get_max_threads(), gemm_backend_name(ctx.gemm()).c_str(), run_dir.string().c_str());
  if (lead && dp > 1)
    std::printf("data parallel: %s over %d ranks, %zu gradient buckets (%s), ZeRO %d\n",
                dist->mesh.str().c_str(), dp, buckets->buckets().size(),
                cfg.parallel.allreduce_dtype.c_str(), opt_zero ? 1 : 0);
  if (lead)
    std::printf("tokens/step %.0f (%smicro-batch %d x %d x accum %d); MFU peak %s (%s)\n",
                tokens_per_step, dp > 1 ? fmt::format("dp {} x ", dp).c_str() : "", B, T, accum,
                format_si(peak, "FLOP/s").c_str(), peak_choice.source.c_str());
  if (lead && mp.low_precision()) std::printf("%s\n", mp.describe(ctx.gemm()).c_str());
  std::fflush(stdout);

  std::optional<MetricsLog> metrics;
  if (lead) metrics.emplace(run_dir.string(), total, start_step);
  auto record = [&](const std::string& event, nlohmann::json fields) {
    if (metrics) metrics->record(event, std::move(fields));
  };
  auto say = [&](const std::string& line) {
    if (metrics) metrics->print(line);
    rank_log.line(line);
  };
  record(start_step > 0 ? "resume" : "start", {{"step", start_step},
                                                   {"braid_version", braid_version()},
                                                   {"git_commit", braid_git_commit()},
                                                   {"peak_flops_per_s", peak},
                                                   {"peak_source", peak_choice.source}});
  TrainSummary summary;
  summary.run_dir = run_dir.string();
  summary.final_step = start_step;
  if (start_step >= total)
    say(fmt::format("nothing to train: the checkpoint is at step {} and train.steps is {}",
                          start_step, total));
  // What a model that knows only token frequencies would score (written by `braid prepare`).
  const double unigram = read_unigram_entropy((data_dir / "meta.json").string());
  const std::string baseline =
      unigram > 0 ? fmt::format(" (unigram entropy of the data: {:.4f})", unigram) : "";

  // DP rank r's micro-batch m is the step's global micro-batch m * dp + r (data/loader.h).
  Loader loader(train_path, cfg.data, 0, 1, start_step, dp_rank, dp);
  const float grad_scale = static_cast<float>(1.0 / tokens_per_step);
  double window_time = 0.0, window_loss = 0.0, train_time = 0.0;
  int window_steps = 0;
  int window_loss_steps = 0, window_skipped = 0;  // fp16: skipped steps have no loss in the mean
  // Kernel-group times of the steps only (evaluation and checkpoints excluded).
  KernelTimes window_kernels, train_kernels;
  auto last_checkpoint_time = std::chrono::steady_clock::now();
  MemoryWindows memory(ctx.allocator());
  std::string last_checkpoint = resume_from.value_or("");
  for (int64_t step = start_step; step < total; ++step) {
    const KernelTimes k0 = ctx.profiler().times();
    const auto t0 = std::chrono::steady_clock::now();
    if (dist) maybe_fail(*dist, step + 1);
    model.zero_grad(ctx);
    LossSum ls;
    for (int m = 0; m < accum; ++m) {
      Batch b = loader.next();
      MicroBatch mb(ctx);
      mb.dropout_seed = micro_batch_dropout_seed(cfg.data.seed, step, m);
      if (buckets) buckets->attach(mb, m == accum - 1);  // only the last one communicates
      LossSum l = model.forward_backward(mb, b.tokens, b.targets,
                                         mp.scaling() ? grad_scale * mp.loss_scale() : grad_scale);
      ls.sum += l.sum;
      ls.count += l.count;
    }
    if (buckets) {
      buckets->finish();  // every bucket reduced before the norm and clipping
      const std::vector<double> g = all_sum_doubles(*dist->dp, {ls.sum, static_cast<double>(ls.count)});
      ls.sum = g[0];
      ls.count = static_cast<int64_t>(g[1]);
    }
    const double loss = ls.sum / static_cast<double>(ls.count);
    if (mp.low_precision()) mp.inject_test_overflow(step + 1);
    double norm = opt_zero ? opt_zero->grad_norm() : global_grad_norm(ctx, model.parameters());
    // fp16: an overflowing step is skipped (the scale backs off); else gradients are unscaled.
    const bool skipped = mp.check_overflow(loss, &norm, step + 1, [&](const std::string& m) {
      say(m);
      record("loss_scale", {{"step", step + 1}, {"message", m}, {"scale", mp.loss_scale()}});
    });
    if (!skipped && (!std::isfinite(loss) || !std::isfinite(norm))) {
      record("diverged", {{"step", step + 1}, {"step_loss", loss}, {"grad_norm", norm}});
      user_error(
          "training diverged at step {}: loss {}, gradient norm {}; no checkpoint was "
          "written for it. Lower optim.lr or raise optim.warmup_steps, then resume from {}",
          step + 1, loss, norm,
          last_checkpoint.empty() ? "the start (no checkpoint yet)" : last_checkpoint);
    }
    const float lr = lr_at(cfg.optim, step, total);
    if (skipped) {
      // nothing: the step is skipped
    } else if (opt_zero) {
      opt_zero->clip(norm, cfg.optim.grad_clip);
      opt_zero->step(lr);
    } else {
      clip_grad_norm(ctx, model.parameters(), norm, cfg.optim.grad_clip);
      mp.step(*opt_plain, lr);
    }
    const double dt = seconds_since(t0);
    const KernelTimes dk = ctx.profiler().times() - k0;
    window_kernels += dk;
    train_kernels += dk;
    window_time += dt;
    train_time += dt;
    window_loss += skipped ? 0.0 : loss;  // an overflowed loss would poison the window mean
    ++window_steps;
    if (!skipped) ++window_loss_steps;
    window_skipped += skipped ? 1 : 0;
    summary.last_train_loss = skipped ? summary.last_train_loss : loss;
    summary.final_step = step + 1;
    ++summary.steps_done;
    const int64_t done = step + 1;
    if (metrics) metrics->progress(done, loss);

    if (done % cfg.train.log_interval == 0 || done == total) {
      const double step_s = window_time / window_steps;
      const double mean_loss = window_loss_steps > 0 ? window_loss / window_loss_steps : NAN;
      const double tok_s = tokens_per_step / step_s;
      const double flops = flops_per_step / step_s;
      const double eta = step_s * static_cast<double>(total - done);
      const MemoryStats window_mem = memory.end_window();  // this window's peaks
      const double mem_mib = static_cast<double>(window_mem.peak_total) / 1048576.0;
      const double act_mib =
          static_cast<double>(window_mem.peak_bytes[static_cast<int>(MemCategory::Activations)]) / 1048576.0;
      say(fmt::format("step {:>6}/{} | loss {:.4f} | lr {:.2e} | grad norm {:.3f} | {:.0f} tok/s | "
                      "{} | MFU {} | mem {:.0f} MiB (act {:.0f}) | ETA {}",
                      done, total, mean_loss, lr, norm, tok_s, format_si(flops, "FLOP/s"),
                      lead ? fmt::format("{:.1f}%", 100.0 * flops / peak) : std::string("n/a"),
                      mem_mib, act_mib, format_duration(eta)));
      record("train",
                 {{"step", done},
                  {"loss", mean_loss},
                  {"lr", lr},
                  {"grad_norm", norm},
                  {"tokens_per_s", tok_s},
                  {"flops_per_s", flops},
                  {"mfu", flops / peak},
                  {"peak_tensor_mib", mem_mib},
                  {"peak_memory_mib", peaks_mib_json(window_mem)},
                  {"peak_rss_mib", peak_rss_mib()},
                  {"memory_mib", memory_by_category_mib(ctx.allocator().stats())},
                  {"step_s", step_s},
                  {"step_loss", loss},
                  {"kernel_s", kernel_seconds_json(window_kernels, window_time, window_steps)}});
      window_time = window_loss = 0.0;
      if (mp.scaling()) {
        record("loss_scale",
               {{"step", done}, {"scale", mp.loss_scale()}, {"skipped_steps", window_skipped}});
      }
      window_steps = window_loss_steps = window_skipped = 0;
      window_kernels = KernelTimes{};
    }
    if (lead && cfg.train.eval_interval > 0 &&
        (done % cfg.train.eval_interval == 0 || done == total)) {
      const double vl = evaluate(ctx, model, val, cfg.train.eval_batches);
      summary.last_val_loss = vl;
      say(fmt::format("step {:>6}/{} | val loss {:.4f} | val ppl {:.2f}{}", done, total, vl,
                            std::exp(vl), baseline));
      record("eval", {{"step", done}, {"val_loss", vl}});
    }
    // ---- checkpoint, and a requested stop ----
    int stop_signal = stop.requested();
    bool due = checkpoint_due(cfg.checkpoint, done, total,
                              seconds_since(last_checkpoint_time) / 60.0, stop_signal != 0);
    if (dist) {
      // Ranks' clocks and signal arrival differ: agree, so all save and stop at the same step.
      const std::vector<int> agreed = all_max_ints(*dist->dp, {due ? 1 : 0, stop_signal});
      due = agreed[0] != 0;
      stop_signal = agreed[1];
    }
    if (due) {
      if (dist) maybe_fail(*dist, done, /*saving=*/true);
      const auto t_save = std::chrono::steady_clock::now();
      // ZeRO-1: every rank sends its moments (collective); rank 0 alone writes the files
      // (temp dir, manifest last, rename), so a rank dying here leaves the last checkpoint.
      const auto state = opt_zero ? opt_zero->gather_state() : opt_plain->state_tensors();
      const int64_t opt_steps = opt_zero ? opt_zero->steps_taken() : opt_plain->steps_taken();
      const auto weights = mp.gather_checkpoint_weights(lead);  // ZeRO-1 + 16 bits: collective
      if (lead) {
        last_checkpoint = ckpt.save(done, weights, state,
                                    checkpoint_state(cfg, done, opt_steps, mp, dp, opt_zero ? 1 : 0));
        if (cfg.lora.enabled())  // the adapters alone, PEFT layout, beside the checkpoints
          save_peft_adapter(model, cfg.lora, cfg.lora.init_from, run_dir / "adapter");
      } else {
        last_checkpoint = (fs::path(ckpt.dir()) / CheckpointManager::dir_name(done)).string();
      }
      if (dist) dist->dp->barrier().wait();  // the checkpoint is complete for every rank
      last_checkpoint_time = std::chrono::steady_clock::now();
      record("checkpoint",
             {{"step", done}, {"path", last_checkpoint}, {"save_s", seconds_since(t_save)}});
      say(fmt::format("checkpoint: {}", last_checkpoint));
    }
    if (stop_signal != 0) {
      summary.stopped_by = StopSignals::name(stop_signal);
      record("stop",
                 {{"step", done}, {"signal", summary.stopped_by}, {"checkpoint", last_checkpoint}});
      say(
          fmt::format("stopped by {} after step {}/{}; checkpoint: {}\nrun the same command "
                      "again to continue (checkpoint.resume: auto)",
                      summary.stopped_by, done, total, last_checkpoint));
      break;
    }
  }
  record("end",
             {{"step", summary.final_step},
              {"train_seconds", train_time},
              {"wall_seconds", seconds_since(t_start)},
              {"kernel_s", kernel_seconds_json(train_kernels, train_time, summary.steps_done)}});
  if (summary.steps_done > 0) {
    say(time_split_line(train_kernels, train_time, summary.steps_done));
    say("peak memory by category: " + memory_peaks_line(memory.run_peaks()));
  }

  if (lead && cfg.train.sample_tokens > 0 && !tok_path.empty() && summary.stopped_by.empty()) {
    std::unique_ptr<Tokenizer> tok = Tokenizer::load(tok_path);
    std::vector<int32_t> prompt = tok->encode(cfg.train.sample_prompt.empty() ? "\n" : cfg.train.sample_prompt);
    SampleOptions so;
    so.max_new_tokens = cfg.train.sample_tokens;
    so.temperature = cfg.train.sample_temperature;
    so.top_k = cfg.train.sample_top_k;
    so.seed = cfg.data.seed;
    std::vector<int32_t> out = generate(ctx, model, prompt, so);
    std::printf("\n---- sample (temperature %.2f, top-k %d) ----\n%s%s\n----\n", so.temperature, so.top_k,
                cfg.train.sample_prompt.c_str(), tok->decode(out).c_str());
  }
  return summary;
}

}  // namespace braid
