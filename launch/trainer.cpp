// The training loop: resume, micro-batch accumulation, clipping, AdamW, metrics, evaluation,
// checkpoints and the closing sample.
#include "launch/trainer.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>

#include <fmt/ranges.h>

#include "core/kernels/gemm.h"
#include "core/models/generate.h"
#include "core/models/lora.h"
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
#include "launch/rank_model.h"
#include "launch/run_lock.h"
#include "launch/run_record.h"
#include "launch/signals.h"
#include "launch/train_checkpoint.h"
#include "launch/train_log.h"
#include "optim/adamw.h"
#include "optim/zero_adamw.h"
#include "parallel/chrome_trace.h"
#include "parallel/grad_buckets.h"
#include "parallel/scalar_reduce.h"

namespace braid {

namespace fs = std::filesystem;

namespace {

// How long the start-up peak probe runs: the best 1024^3 GEMM rate seen in that time is the
// MFU denominator when train.peak_tflops is 0. On a shared or virtual machine whose speed
// drifts over seconds (docs/benchmarks.md, bench_drift), 0.5 s often saw only a slow spell and
// read MFU high (93 % in one quickstart run); 2 s of best-of is steadier.
constexpr double kPeakProbeSeconds = 2.0;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Gradient buckets over the DP group: all-reduce (sum, since every rank scales its loss by
// 1 / global tokens), or reduce-scatter for ZeRO-1. GPT-2's tied embedding across pipeline
// stages is final only after the step's sum over its two stages (a late contribution).
std::unique_ptr<GradBuckets> make_buckets(ExecContext& ctx, const RankModel& model,
                                          Communicator& dp, const RunConfig& cfg) {
  GradBucketOptions o;
  o.bucket_bytes = static_cast<int64_t>(cfg.parallel.bucket_mb * 1048576.0);
  o.first_bucket_bytes = static_cast<int64_t>(cfg.parallel.first_bucket_mb * 1048576.0);
  o.comm_dtype = cfg.parallel.allreduce_dtype_value();
  o.op = ReduceOp::Sum;
  o.reduce_scatter = cfg.optim.zero == 1;
  auto b = std::make_unique<GradBuckets>(ctx, model.parameters(), dp, o);
  for (Parameter* p : model.late_parameters()) b->add_late_contribution(*p);
  return b;
}

// This rank's share of a sum every rank must know: the step's loss lives on the last stage,
// the same on each of its tensor-parallel ranks, so exactly one rank per DP replica adds it.
struct LossReduce {
  Communicator* world = nullptr;  // null: one process
  bool counts = true;             // this rank's values enter the sum
  LossSum operator()(LossSum mine) const {
    if (!world) return mine;
    const std::vector<double> g = all_sum_doubles(
        *world, {counts ? mine.sum : 0.0, counts ? static_cast<double>(mine.count) : 0.0});
    return {g[0], static_cast<int64_t>(g[1])};
  }
};

// Validation loss over the first `batches` batches: DP replica r takes batches r, r + dp, ...
double evaluate(RankModel& model, const ValidationSet& val, int batches, int dp, int dp_rank,
                const LossReduce& reduce) {
  LossSum mine;
  const int64_t n = std::min<int64_t>(batches, val.num_batches());
  for (int64_t i = dp_rank; i < n; i += dp) {
    const LossSum l = model.evaluate(val.val_batch(i));
    mine.sum += l.sum;
    mine.count += l.count;
  }
  const LossSum all = reduce(mine);
  return all.count > 0 ? all.sum / static_cast<double>(all.count) : NAN;
}

// The pipeline's measured bubble per stage over a logging window: 1 - busy / makespan.
class BubbleWindow {
 public:
  void add(const PipelineStepResult& r) {
    busy_ += r.busy_s;
    makespan_ += r.makespan_s;
  }
  // Collective over pp; every stage's bubble, in stage order. Resets the window.
  std::vector<double> end(Communicator* pp, int stage, int stages) {
    std::vector<double> v(static_cast<size_t>(2 * stages), 0.0);
    v[static_cast<size_t>(2 * stage)] = busy_;
    v[static_cast<size_t>(2 * stage + 1)] = makespan_;
    if (pp) v = all_sum_doubles(*pp, v);
    std::vector<double> out;
    for (int s = 0; s < stages; ++s)
      out.push_back(v[2 * s + 1] > 0 ? 1.0 - v[2 * s] / v[2 * s + 1] : 0.0);
    busy_ = makespan_ = 0.0;
    return out;
  }

 private:
  double busy_ = 0.0, makespan_ = 0.0;
};

std::string bubble_str(const std::vector<double>& b) {
  std::string s;
  for (double x : b) s += fmt::format("{}{:.1f}", s.empty() ? "" : "/", 100.0 * x);
  return s + "%";
}

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

  // The layout: rank 0 (`lead`) alone prints, writes metrics and records, and commits
  // checkpoints; DP rank 0 of every (tp, pp) shard writes that shard's checkpoint files.
  const bool lead = !dist || dist->rank() == 0;
  const int dp = dist ? dist->mesh.dp() : 1, tp = dist ? dist->mesh.tp() : 1;
  const int pp = dist ? dist->mesh.pp() : 1;
  const int dp_rank = dist ? dist->coord.dp : 0;
  Communicator* world = dist ? &dist->world->world() : nullptr;
  check_rank_layout(cfg, tp, pp, dp);

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

  fs::create_directories(run_dir);
  std::optional<RunLock> run_lock;  // before anything in run_dir is read or written
  if (lead) run_lock.emplace(run_dir.string());
  RankLog rank_log(run_dir, dist ? dist->rank() : -1);
  CheckpointManager ckpt(run_dir.string(), cfg.checkpoint.keep_last);

  // ---- what to resume from (its weights are loaded while the model is built) ----
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
  std::optional<LoadedCheckpoint> ck;
  if (resume_from) {
    ck.emplace(CheckpointManager::load(*resume_from));
    if (ck->state.contains("model")) {
      const std::string diff = model_difference(ck->state.at("model"), cfg.model);
      BRAID_USER_CHECK(diff.empty(), "cannot resume from {}: {}; the checkpoint was written for a "
                       "different model config", *resume_from, diff);
    }
  }

  // One rank's execution context: allocator, profiler and GEMM plan (launch/exec_setup.h).
  std::unique_ptr<ExecContext> ctx_owner = make_cpu_context(cfg.data.seed);
  ExecContext& ctx = *ctx_owner;
  RankModelComms comms;
  if (dist) comms = {dist->tp, dist->pp, dist->embedding};
  // Weights in every layout come from whole tensors: run.init_from's before the split, a
  // resumed checkpoint's cut to each rank's part.
  const bool fine_tune = !ck && !cfg.run.init_from.empty();
  RankModel model(ctx, cfg, comms, init_base.get(), cfg.run.init_from, ck ? &ck->model : nullptr,
                  lead);
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
  MixedPrecision mp(ctx, model.parameters(), cfg.train);
  if (opt_zero) mp.use_zero(*opt_zero);
  std::unique_ptr<AdamW> opt_plain;
  if (!opt_zero) opt_plain = std::make_unique<AdamW>(ctx, mp.optimizer_params(), cfg.optim);
  const ParallelLayout layout{dist ? dist->world->size() : 1, dp, tp, pp, opt_zero ? 1 : 0};
  rank_log.line(fmt::format("rank {} of {} ({}), coordinates dp {} tp {} pp {}, ZeRO {}, {} "
                            "parameters held",
                            dist ? dist->rank() : 0, layout.ranks,
                            dist ? dist->mesh.str() : "one process", dp_rank, model.tp_rank(),
                            model.stage(), layout.zero, model.local_numel()));
  const StopSignals stop;

  // ---- resume: optimizer state and counters ----
  int64_t start_step = 0;
  if (ck) {
    if (ck->state.contains("loss_scaler")) mp.restore(ck->state.at("loss_scaler"));
    if (!ck->optimizer.names().empty()) {
      auto get = [&](const std::string& n) {
        check_tensor_matches(ck->optimizer, n, model.whole_shape(n), DType::F32);
        return model.local_part(n, ck->optimizer.get(n));
      };
      const int64_t steps = ck->state.value("optimizer_steps", ck->step);
      if (opt_zero)
        opt_zero->load_state(get, steps);
      else
        opt_plain->load_state(get, steps);
      start_step = ck->step;
    }
    const std::string msg = fmt::format("resumed from {} (step {})", *resume_from, ck->step);
    if (lead) std::printf("%s\n", msg.c_str());
    rank_log.line(msg);
    ck.reset();  // unmaps the files
  } else if (fine_tune && lead) {
    std::printf("initialised from %s\n", cfg.run.init_from.c_str());
  }
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
  // The MFU peak (a 2 s probe unless cached) only where MFU is reported: one rank's peak,
  // times the ranks (each computes with its own threads).
  const PeakChoice peak_choice =
      lead ? choose_mfu_peak(ctx, cfg.train.peak_tflops, machine, kPeakProbeSeconds)
           : PeakChoice{1.0, "not measured on this rank"};
  const double peak = peak_choice.flops_per_s * layout.ranks;
  if (lead)
    std::printf("braid train: %s, %s %.2fM params, %d threads, gemm %s, run dir %s\n",
                config_path.c_str(), cfg.model.family.c_str(), cfg.model.num_params() / 1e6,
                omp_get_max_threads(), gemm_backend_name(ctx.gemm()).c_str(),
                run_dir.string().c_str());
  if (lead && dist) {
    std::string line = fmt::format("parallel: {} over {} ranks", dist->mesh.str(), layout.ranks);
    if (cfg.parallel.sequence_parallel && tp > 1) line += ", sequence parallel";
    if (pp > 1)
      line += fmt::format(", schedule {} ({} micro-batches{})", cfg.parallel.schedule, accum,
                          cfg.parallel.virtual_stages > 1
                              ? fmt::format(", {} chunks per stage", cfg.parallel.virtual_stages)
                              : std::string());
    if (pp > 1)
      line += fmt::format(", blocks per {}stage [{}]",
                          cfg.parallel.virtual_stages > 1 ? "virtual " : "",
                          fmt::join(model.block_split(), ", "));
    if (buckets)
      line += fmt::format(", {} gradient buckets ({}), ZeRO {}", buckets->buckets().size(),
                          cfg.parallel.allreduce_dtype, layout.zero);
    std::printf("%s\n", line.c_str());
  }
  if (lead)
    std::printf("tokens/step %.0f (%smicro-batch %d x %d x accum %d); MFU peak %s%s (%s)\n",
                tokens_per_step, dp > 1 ? fmt::format("dp {} x ", dp).c_str() : "", B, T, accum,
                format_si(peak_choice.flops_per_s, "FLOP/s").c_str(),
                layout.ranks > 1 ? fmt::format(" x {} ranks", layout.ranks).c_str() : "",
                peak_choice.source.c_str());
  if (lead && mp.low_precision()) std::printf("%s\n", mp.describe(ctx).c_str());
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

  // DP rank r's micro-batch m is the step's global micro-batch m * dp + r (data/loader.h);
  // every rank of a DP replica (its tp x pp ranks) reads the same ones.
  Loader loader(train_path, cfg.data, 0, 1, start_step, dp_rank, dp);
  const float grad_scale = static_cast<float>(1.0 / tokens_per_step);
  const LossReduce reduce{world, model.stage() == model.stages() - 1 && model.tp_rank() == 0};
  const std::vector<Parameter*> late = model.late_parameters();
  double window_time = 0.0, window_loss = 0.0, train_time = 0.0;
  int window_steps = 0;
  int window_loss_steps = 0, window_skipped = 0;  // fp16: skipped steps have no loss in the mean
  // Kernel-group times of the steps only (evaluation and checkpoints excluded).
  KernelTimes window_kernels, train_kernels;
  BubbleWindow bubbles;
  auto last_checkpoint_time = std::chrono::steady_clock::now();
  MemoryWindows memory(ctx.allocator());
  std::string last_checkpoint = resume_from.value_or("");
  std::vector<Batch> micro(static_cast<size_t>(accum));
  for (int64_t step = start_step; step < total; ++step) {
    const KernelTimes k0 = ctx.profiler().times();
    const auto t0 = std::chrono::steady_clock::now();
    if (dist) maybe_fail(*dist, step + 1);
    model.zero_grad();
    for (Batch& b : micro) b = loader.next();
    if (buckets) buckets->begin_step(accum);
    const PipelineStepResult r = model.step(
        micro, mp.scaling() ? grad_scale * mp.loss_scale() : grad_scale,
        [&](MicroBatch& mb, int m) {
          // By the global micro-batch index, so every layout draws the same masks.
          mb.dropout_seed = micro_batch_dropout_seed(cfg.data.seed, step, m * dp + dp_rank);
          if (buckets) buckets->attach(mb);  // buckets start as their gradients become final
        });
    bubbles.add(r);
    if (buckets) {
      for (Parameter* p : late) buckets->grad_ready(*p);  // the tied embedding, summed by step()
      buckets->finish();  // every bucket reduced before the norm and clipping
    }
    const LossSum ls = reduce(r.loss);
    const double loss = ls.sum / static_cast<double>(ls.count);
    if (mp.low_precision()) mp.inject_test_overflow(step + 1);
    double norm = opt_zero ? opt_zero->grad_norm(comms.tp, comms.pp) : model.grad_norm();
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
      // Collective over the pipeline group, so every stage reaches it at the same step.
      const std::vector<double> bubble =
          bubbles.end(pp > 1 ? dist->pp : nullptr, model.stage(), model.stages());
      say(fmt::format("step {:>6}/{} | loss {:.4f} | lr {:.2e} | grad norm {:.3f} | {:.0f} tok/s | "
                      "{} | MFU {} | mem {:.0f} MiB (act {:.0f}){} | ETA {}",
                      done, total, mean_loss, lr, norm, tok_s, format_si(flops, "FLOP/s"),
                      lead ? fmt::format("{:.1f}%", 100.0 * flops / peak) : std::string("n/a"),
                      mem_mib, act_mib,
                      pp > 1 ? " | bubble " + bubble_str(bubble) : std::string(),
                      format_duration(eta)));
      nlohmann::json fields = {{"step", done},
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
                  {"kernel_s", kernel_seconds_json(window_kernels, window_time, window_steps)}};
      if (pp > 1) fields["bubble"] = bubble;
      record("train", std::move(fields));
      window_time = window_loss = 0.0;
      if (mp.scaling()) {
        record("loss_scale",
               {{"step", done}, {"scale", mp.loss_scale()}, {"skipped_steps", window_skipped}});
      }
      window_steps = window_loss_steps = window_skipped = 0;
      window_kernels = KernelTimes{};
    }
    if (cfg.train.eval_interval > 0 && (done % cfg.train.eval_interval == 0 || done == total)) {
      const double vl = evaluate(model, val, cfg.train.eval_batches, dp, dp_rank, reduce);
      summary.last_val_loss = vl;
      say(fmt::format("step {:>6}/{} | val loss {:.4f} | val ppl {:.2f}{}", done, total, vl,
                            std::exp(vl), baseline));
      record("eval", {{"step", done}, {"val_loss", vl}});
    }
    // ---- checkpoint, and a requested stop ----
    int stop_signal = stop.requested();
    bool due = checkpoint_due(cfg.checkpoint, done, total,
                              seconds_since(last_checkpoint_time) / 60.0, stop_signal != 0);
    if (world) {
      // Ranks' clocks and signal arrival differ: agree, so all save and stop at the same step.
      const std::vector<int> agreed = all_max_ints(*world, {due ? 1 : 0, stop_signal});
      due = agreed[0] != 0;
      stop_signal = agreed[1];
    }
    if (due) {
      if (dist) maybe_fail(*dist, done, /*saving=*/true);
      const auto t_save = std::chrono::steady_clock::now();
      const int64_t opt_steps = opt_zero ? opt_zero->steps_taken() : opt_plain->steps_taken();
      const nlohmann::json manifest_state = checkpoint_state(cfg, done, opt_steps, mp, layout);
      last_checkpoint = write_checkpoint(ckpt, done, model, mp, opt_plain.get(), opt_zero.get(),
                                         manifest_state, world, lead, dp_rank);
      if (lead && cfg.lora.enabled())  // the adapters alone, PEFT layout, beside the checkpoints
        save_lora_adapter(ctx, cfg, model.whole(), last_checkpoint, run_dir / "adapter");
      if (world) world->barrier().wait();  // the checkpoint is complete for every rank
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
  if (cfg.parallel.trace) {  // one timeline file for the whole job, ranks as processes
    std::vector<TraceEvent> events =
        world ? gather_trace(*world, model.executor().trace()) : model.executor().trace();
    if (lead) {
      write_chrome_trace((run_dir / "trace.json").string(), std::move(events));
      say(fmt::format("pipeline timeline: {}", (run_dir / "trace.json").string()));
    }
  }

  if (lead && cfg.train.sample_tokens > 0 && !tok_path.empty() && summary.stopped_by.empty()) {
    if (Transformer* whole = model.whole()) {
      std::unique_ptr<Tokenizer> tok = Tokenizer::load(tok_path);
      std::vector<int32_t> prompt =
          tok->encode(cfg.train.sample_prompt.empty() ? "\n" : cfg.train.sample_prompt);
      SampleOptions so;
      so.max_new_tokens = cfg.train.sample_tokens;
      so.temperature = cfg.train.sample_temperature;
      so.top_k = cfg.train.sample_top_k;
      so.seed = cfg.data.seed;
      std::vector<int32_t> out = generate(ctx, *whole, prompt, so);
      std::printf("\n---- sample (temperature %.2f, top-k %d) ----\n%s%s\n----\n", so.temperature,
                  so.top_k, cfg.train.sample_prompt.c_str(), tok->decode(out).c_str());
    } else {
      std::printf("no closing sample under tensor/pipeline parallelism: run braid generate %s\n",
                  run_dir.string().c_str());
    }
  }
  return summary;
}

}  // namespace braid
