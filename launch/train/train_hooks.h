// Step hooks: what runs around the training loop's optimizer steps, each a small object the
// trainer registers in order: metrics and the step log (launch/train/train_log.h), evaluation,
// checkpoints and stopping (launch/train/train_checkpoint.h), and at the end the pipeline timeline
// and the closing sample. Every rank registers the same hooks in the same order and calls each
// at the same step, so a hook may be collective (the evaluation, the checkpoint's agreement and
// writes, the bubble over the pipeline group, the gathered timeline).
#pragma once

#include <cstdint>
#include <string>

#include "core/profile.h"
#include "launch/train/trainer.h"
#include "parallel/pipeline_executor.h"

namespace braid {

class TrainRun;

// One optimizer step, as the loop ran it.
struct StepInfo {
  int64_t step = 0;      // 1-based: the step just finished
  double loss = 0;       // the global batch's mean loss (an fp16 overflow's may be inf/NaN)
  double grad_norm = 0;  // after unscaling, before clipping
  float lr = 0;
  int64_t epoch = 0;            // epoch mode: 1-based epoch of the step's first sequence; else 0
  bool skipped = false;         // fp16 overflow: no update
  double seconds = 0;           // wall time of the step
  KernelTimes kernels;          // kernel-group times within it
  PipelineStepResult pipeline;  // this stage's part: busy time and makespan
  bool stop = false;            // set by a hook: the run ends after this step
};

class TrainHook {
 public:
  virtual ~TrainHook() = default;
  // After every optimizer step, on every rank.
  virtual void on_step_end(StepInfo& s) { (void)s; }
  // Once after the last step or a stop, on every rank.
  virtual void on_train_end(const TrainSummary& summary) { (void)summary; }
};

// Validation loss every train.eval_interval steps and at the end: DP replica r takes batches
// r, r + dp, ... of the first train.eval_batches (collective). Writes summary.last_val_loss.
class EvalHook final : public TrainHook {
 public:
  EvalHook(TrainRun& run, TrainSummary& summary);
  void on_step_end(StepInfo& s) override;

 private:
  TrainRun& run_;
  TrainSummary& summary_;
  std::string baseline_;  // " (unigram entropy of the data: ...)" or ""
};

// parallel.trace: one Chrome trace of every rank's pipeline actions, RUN_DIR/trace.json,
// gathered at the end (collective).
class TraceHook final : public TrainHook {
 public:
  explicit TraceHook(TrainRun& run) : run_(run) {}
  void on_train_end(const TrainSummary& summary) override;

 private:
  TrainRun& run_;
};

// train.sample_tokens: a sample from the trained model on the lead rank, unless a signal ended
// the run (one model only; under tensor/pipeline parallelism a pointer to braid generate).
class SampleHook final : public TrainHook {
 public:
  explicit SampleHook(TrainRun& run) : run_(run) {}
  void on_train_end(const TrainSummary& summary) override;

 private:
  TrainRun& run_;
};

}  // namespace braid
