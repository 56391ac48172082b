// The training loop: one optimizer step after another over a TrainRun (launch/train/train_run.h:
// everything built and resumed), each followed by the step hooks (launch/train/train_hooks.h).
#include "launch/train/trainer.h"

#include <chrono>
#include <cmath>
#include <memory>
#include <vector>

#include "launch/train/model_passes.h"
#include "launch/train/train_checkpoint.h"
#include "launch/train/train_hooks.h"
#include "launch/train/train_log.h"
#include "launch/train/train_run.h"
#include "optim/adamw.h"

namespace braid {

namespace {

// One optimizer step (`step` 0-based): the schedule's forward and backward over this DP rank's
// micro-batches with the data-parallel reduction overlapping it, the global loss, the gradient
// norm, fp16's overflow check, clipping and the update. The same calls in every layout and
// precision: groups of one, the Optimizer interface and DataParallel hide the differences.
StepInfo train_step(TrainRun& run, int64_t step, const std::string& last_checkpoint) {
  const RunConfig& cfg = run.cfg;
  DataParallel& dp = *run.data_parallel;
  Optimizer& opt = *run.opt;
  const KernelTimes k0 = run.ctx->profiler().times();
  const auto t0 = std::chrono::steady_clock::now();
  StepInfo s;
  s.step = step + 1;
  run.model->zero_grad();
  if (run.loader->epoch_mode())
    s.epoch = run.loader->with_epochs(
        [&](EpochStream& e) { return e.locate(step * run.loader->global_batch()).first + 1; });
  for (Batch& b : run.micro) b = run.loader->next();
  dp.begin_step(cfg.data.grad_accum);
  s.pipeline = run.model->step(
      run.micro, run.step_grad_scale(run.micro) * opt.loss_scale(), [&](MicroBatch& mb, int m) {
        // By the global micro-batch index: every layout draws the
        // same dropout masks.
        mb.dropout_seed = micro_batch_dropout_seed(cfg.data.seed, step,
                                                   m * run.dims.dp_size() + run.dims.coord().dp);
        dp.attach(mb);  // buckets start as their gradients are final
      });
  dp.finish();  // every bucket reduced before the norm and clipping
  const LossSum ls = run.global_loss(s.pipeline.loss);
  // A step whose windows hold no trained token (loss mask) has no loss and no gradient.
  s.loss = ls.count > 0 ? ls.sum / static_cast<double>(ls.count) : 0.0;
  run.overflow_test->after_backward(s.step, opt, dp);
  s.grad_norm = opt.grad_norm();
  // fp16: an overflowing step is skipped (the scale backs off); else gradients are unscaled.
  s.skipped = opt.skip_step(s.loss, &s.grad_norm, s.step, [&](const std::string& m) {
    run.log.say(m);
    run.log.record("loss_scale", {{"step", s.step}, {"message", m}, {"scale", opt.loss_scale()}});
  });
  if (!s.skipped && (!std::isfinite(s.loss) || !std::isfinite(s.grad_norm))) {
    run.log.record("diverged",
                   {{"step", s.step}, {"step_loss", s.loss}, {"grad_norm", s.grad_norm}});
    user_error(
        "training diverged at step {}: loss {}, gradient norm {}; no checkpoint was written for "
        "it. Lower optim.lr or raise optim.warmup_steps, then resume from {}",
        s.step, s.loss, s.grad_norm,
        last_checkpoint.empty() ? "the start (no checkpoint yet)" : last_checkpoint);
  }
  s.lr = lr_at(cfg.optim, step, cfg.train.steps);
  if (!s.skipped) {
    opt.clip(s.grad_norm, cfg.optim.grad_clip);
    opt.step(s.lr);
  }
  // On a GPU the optimizer's kernels are only queued: the step ends when the device is done.
  run.ctx->stream().synchronize();
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  s.kernels = run.ctx->profiler().times() - k0;
  return s;
}

}  // namespace

TrainSummary train(const RunConfig& cfg, const std::string& config_path, const DistRun& dist) {
  TrainRun run(cfg, config_path, dist);
  TrainSummary summary;
  summary.run_dir = run.run_dir.string();
  summary.final_step = run.start_step;
  // The step hooks, run in this order on every rank (several are collective).
  std::vector<std::unique_ptr<TrainHook>> hooks;
  hooks.push_back(std::make_unique<MetricsHook>(run));
  hooks.push_back(std::make_unique<EvalHook>(run, summary));
  auto saver = std::make_unique<CheckpointHook>(run, summary);
  const CheckpointHook& checkpoints = *saver;
  hooks.push_back(std::move(saver));
  if (run.cfg.parallel.trace) hooks.push_back(std::make_unique<TraceHook>(run));
  if (run.cfg.train.sample_tokens > 0) hooks.push_back(std::make_unique<SampleHook>(run));

  for (int64_t step = run.start_step; step < run.cfg.train.steps; ++step) {
    maybe_fail(dist, step + 1);
    StepInfo s = train_step(run, step, checkpoints.last());
    if (!s.skipped) summary.last_train_loss = s.loss;
    summary.final_step = s.step;
    ++summary.steps_done;
    for (auto& h : hooks) h->on_step_end(s);
    if (s.stop) break;
  }
  for (auto& h : hooks) h->on_train_end(summary);
  return summary;
}

}  // namespace braid
