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
                                const MixedPrecision& mp) {
  nlohmann::json j = {{"model", fields_to_json(cfg.model)},
                      {"optimizer_steps", optimizer_steps},
                      {"data", {{"seed", cfg.data.seed}, {"next_step", done}}},
                      // Training draws randomness only from counter-based streams (data windows
                      // from (seed, step, micro), init from (seed, name)), so the seeds and the
                      // step are the whole RNG state.
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

}  // namespace

TrainSummary train(const RunConfig& cfg_in, const std::string& config_path) {
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
  Transformer model(ctx, cfg.model);
  model.init_weights();
  apply_model_passes(model, cfg, init_base.get());  // init_from, LoRA, checkpointing
  init_base.reset();
  // train.precision: bf16/fp16 compute weights, f32 masters for the optimizer (fp32: as is).
  MixedPrecision mp(ctx, model, cfg.train);
  AdamW opt(ctx, mp.optimizer_params(), cfg.optim);
  fs::create_directories(run_dir);
  const RunLock run_lock(run_dir.string());  // before anything in run_dir is read or written
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
      opt.load_state([&](const std::string& n) {
        check_tensor_matches(ck.optimizer, n, model.find_parameter(n.substr(0, n.rfind('.')))->value.shape(),
                             DType::F32, ck.optimizer.path());
        return ck.optimizer.get(n);
      }, ck.state.value("optimizer_steps", ck.step));
      start_step = ck.step;
    }
    std::printf("resumed from %s (step %lld)\n", resume_from->c_str(), static_cast<long long>(ck.step));
  } else if (!cfg.run.init_from.empty()) {  // fine-tuning: weights from a run or HF directory
    init_weights_from(model, cfg.run.init_from);
    std::printf("initialised from %s\n", cfg.run.init_from.c_str());
  }
  // ---- the run record: config (kept across resumes), version and machine ----
  const std::string config_warning = record_run_config(cfg, run_dir, start_step);
  if (!config_warning.empty()) std::printf("%s\n", config_warning.c_str());
  const MachineInfo machine = machine_info(ctx.gemm());
  append_run_record(run_dir, machine, start_step);
  if (!tok_path.empty()) fs::copy_file(tok_path, run_dir / kTokenizerFile, fs::copy_options::overwrite_existing);

  const int64_t total = cfg.train.steps;
  const int B = cfg.data.micro_batch, T = cfg.data.seq_len, accum = cfg.data.grad_accum;
  const double tokens_per_step = static_cast<double>(B) * T * accum;
  const double flops_per_step = cfg.model.flops_per_token(T) * tokens_per_step;
  const PeakChoice peak_choice = choose_mfu_peak(ctx, cfg.train.peak_tflops, machine, kPeakProbeSeconds);
  const double peak = peak_choice.flops_per_s;
  std::printf("braid train: %s, %s %.2fM params, %d threads, gemm %s, run dir %s\n",
              config_path.c_str(), cfg.model.family.c_str(), cfg.model.num_params() / 1e6,
              omp_get_max_threads(), gemm_backend_name(ctx.gemm()).c_str(), run_dir.string().c_str());
  std::printf("tokens/step %.0f (micro-batch %d x %d x accum %d); MFU peak %s (%s)\n",
              tokens_per_step, B, T, accum, format_si(peak, "FLOP/s").c_str(),
              peak_choice.source.c_str());
  if (mp.low_precision()) std::printf("%s\n", mp.describe(ctx.gemm()).c_str());
  std::fflush(stdout);

  MetricsLog log(run_dir.string(), total, start_step);
  log.record(start_step > 0 ? "resume" : "start", {{"step", start_step},
                                                   {"braid_version", braid_version()},
                                                   {"git_commit", braid_git_commit()},
                                                   {"peak_flops_per_s", peak},
                                                   {"peak_source", peak_choice.source}});
  TrainSummary summary;
  summary.run_dir = run_dir.string();
  summary.final_step = start_step;
  if (start_step >= total)
    log.print(fmt::format("nothing to train: the checkpoint is at step {} and train.steps is {}",
                          start_step, total));
  // What a model that knows only token frequencies would score (written by `braid prepare`).
  const double unigram = read_unigram_entropy((data_dir / "meta.json").string());
  const std::string baseline =
      unigram > 0 ? fmt::format(" (unigram entropy of the data: {:.4f})", unigram) : "";

  Loader loader(train_path, cfg.data, 0, 1, start_step);
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
    model.zero_grad(ctx);
    LossSum ls;
    for (int m = 0; m < accum; ++m) {
      Batch b = loader.next();
      MicroBatch mb(ctx);
      mb.dropout_seed = micro_batch_dropout_seed(cfg.data.seed, step, m);
      LossSum l = model.forward_backward(mb, b.tokens, b.targets,
                                         mp.scaling() ? grad_scale * mp.loss_scale() : grad_scale);
      ls.sum += l.sum;
      ls.count += l.count;
    }
    const double loss = ls.sum / static_cast<double>(ls.count);
    if (mp.low_precision()) mp.inject_test_overflow(step + 1);
    double norm = global_grad_norm(ctx, model.parameters());
    // fp16: an overflowing step is skipped (the scale backs off); else gradients are unscaled.
    const bool skipped = mp.check_overflow(loss, &norm, step + 1, [&](const std::string& m) {
      log.print(m);
      log.record("loss_scale", {{"step", step + 1}, {"message", m}, {"scale", mp.loss_scale()}});
    });
    if (!skipped && (!std::isfinite(loss) || !std::isfinite(norm))) {
      log.record("diverged", {{"step", step + 1}, {"step_loss", loss}, {"grad_norm", norm}});
      user_error(
          "training diverged at step {}: loss {}, gradient norm {}; no checkpoint was "
          "written for it. Lower optim.lr or raise optim.warmup_steps, then resume from {}",
          step + 1, loss, norm,
          last_checkpoint.empty() ? "the start (no checkpoint yet)" : last_checkpoint);
    }
    const float lr = lr_at(cfg.optim, step, total);
    if (!skipped) {
      clip_grad_norm(ctx, model.parameters(), norm, cfg.optim.grad_clip);
      mp.step(opt, lr);
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
    log.progress(done, loss);

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
      log.print(fmt::format("step {:>6}/{} | loss {:.4f} | lr {:.2e} | grad norm {:.3f} | {:.0f} tok/s | "
                            "{} | MFU {:.1f}% | mem {:.0f} MiB (act {:.0f}) | ETA {}",
                            done, total, mean_loss, lr, norm, tok_s,
                            format_si(flops, "FLOP/s"), 100.0 * flops / peak, mem_mib, act_mib, format_duration(eta)));
      log.record("train",
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
        log.record("loss_scale",
                   {{"step", done}, {"scale", mp.loss_scale()}, {"skipped_steps", window_skipped}});
      }
      window_steps = window_loss_steps = window_skipped = 0;
      window_kernels = KernelTimes{};
    }
    if (cfg.train.eval_interval > 0 && (done % cfg.train.eval_interval == 0 || done == total)) {
      const double vl = evaluate(ctx, model, val, cfg.train.eval_batches);
      summary.last_val_loss = vl;
      log.print(fmt::format("step {:>6}/{} | val loss {:.4f} | val ppl {:.2f}{}", done, total, vl,
                            std::exp(vl), baseline));
      log.record("eval", {{"step", done}, {"val_loss", vl}});
    }
    // ---- checkpoint, and a requested stop ----
    const int stop_signal = stop.requested();
    if (checkpoint_due(cfg.checkpoint, done, total, seconds_since(last_checkpoint_time) / 60.0,
                       stop_signal != 0)) {
      const auto t_save = std::chrono::steady_clock::now();
      last_checkpoint = ckpt.save(done, mp.checkpoint_weights(), opt.state_tensors(),
                                  checkpoint_state(cfg, done, opt.steps_taken(), mp));
      last_checkpoint_time = std::chrono::steady_clock::now();
      if (cfg.lora.enabled())  // the adapters alone, PEFT layout, beside the checkpoints
        save_peft_adapter(model, cfg.lora, cfg.lora.init_from, run_dir / "adapter");
      log.record("checkpoint",
                 {{"step", done}, {"path", last_checkpoint}, {"save_s", seconds_since(t_save)}});
      log.print(fmt::format("checkpoint: {}", last_checkpoint));
    }
    if (stop_signal != 0) {
      summary.stopped_by = StopSignals::name(stop_signal);
      log.record("stop",
                 {{"step", done}, {"signal", summary.stopped_by}, {"checkpoint", last_checkpoint}});
      log.print(
          fmt::format("stopped by {} after step {}/{}; checkpoint: {}\nrun the same command "
                      "again to continue (checkpoint.resume: auto)",
                      summary.stopped_by, done, total, last_checkpoint));
      break;
    }
  }
  log.record("end",
             {{"step", summary.final_step},
              {"train_seconds", train_time},
              {"wall_seconds", seconds_since(t_start)},
              {"kernel_s", kernel_seconds_json(train_kernels, train_time, summary.steps_done)}});
  if (summary.steps_done > 0) {
    log.print(time_split_line(train_kernels, train_time, summary.steps_done));
    log.print("peak memory by category: " + memory_peaks_line(memory.run_peaks()));
  }

  if (cfg.train.sample_tokens > 0 && !tok_path.empty() && summary.stopped_by.empty()) {
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
