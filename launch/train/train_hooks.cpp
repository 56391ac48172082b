// The evaluation, timeline and closing-sample step hooks.
#include "launch/train/train_hooks.h"

#include <algorithm>
#include <cmath>

#include "core/models/generate.h"
#include "data/tokenizer.h"
#include "launch/train/train_run.h"
#include "parallel/chrome_trace.h"

namespace braid {

EvalHook::EvalHook(TrainRun& run, TrainSummary& summary) : run_(run), summary_(summary) {
  // What a model that knows only token frequencies would score (written by `braid prepare`).
  const double unigram = read_unigram_entropy((run.data_dir / "meta.json").string());
  if (unigram > 0) baseline_ = fmt::format(" (unigram entropy of the data: {:.4f})", unigram);
  if (run.cfg.train.eval_interval > 0 && run.val->packed())
    run.log.say(fmt::format("validation: the samples of {} packed as training packs them, {} "
                            "batches per pass (eval_batches {})",
                            run.val_path, run.val->num_batches(), run.cfg.train.eval_batches));
}

void EvalHook::on_step_end(StepInfo& s) {
  const TrainConfig& t = run_.cfg.train;
  if (t.eval_interval <= 0 || (s.step % t.eval_interval != 0 && s.step != t.steps)) return;
  const int dp = run_.dims.dp_size(), dp_rank = run_.dims.coord().dp;
  LossSum mine;
  const int64_t n = std::min<int64_t>(t.eval_batches, run_.val->num_batches());
  for (int64_t i = dp_rank; i < n; i += dp) {
    const LossSum l = run_.model->evaluate(run_.val->val_batch(i));
    mine.sum += l.sum;
    mine.count += l.count;
  }
  const LossSum all = run_.global_loss(mine);
  const double vl = all.count > 0 ? all.sum / static_cast<double>(all.count) : NAN;
  summary_.last_val_loss = vl;
  run_.log.say(fmt::format("step {:>6}/{} | val loss {:.4f} | val ppl {:.2f}{}", s.step, t.steps,
                           vl, std::exp(vl), baseline_));
  run_.log.record("eval", {{"step", s.step}, {"val_loss", vl}});
}

void TraceHook::on_train_end(const TrainSummary& /*summary*/) {
  // One timeline file for the whole job, ranks as processes.
  std::vector<TraceEvent> events = gather_trace(run_.dims.world(), run_.model->executor().trace());
  if (!run_.dims.lead()) return;
  const std::string path = (run_.run_dir / "trace.json").string();
  write_chrome_trace(path, std::move(events));
  run_.log.say(fmt::format("pipeline timeline: {}", path));
}

void SampleHook::on_train_end(const TrainSummary& summary) {
  const TrainConfig& t = run_.cfg.train;
  if (!run_.dims.lead() || run_.tok_path.empty() || !summary.stopped_by.empty()) return;
  Transformer* whole = run_.model->whole();
  if (!whole) {
    std::printf("no closing sample under tensor/pipeline parallelism: run braid generate %s\n",
                run_.run_dir.string().c_str());
    return;
  }
  std::unique_ptr<Tokenizer> tok = Tokenizer::load(run_.tok_path);
  std::vector<int32_t> prompt = tok->encode(t.sample_prompt.empty() ? "\n" : t.sample_prompt);
  SampleOptions so;
  so.max_new_tokens = t.sample_tokens;
  so.temperature = t.sample_temperature;
  so.top_k = t.sample_top_k;
  so.seed = run_.cfg.data.seed;
  std::vector<int32_t> out = generate(*run_.ctx, *whole, prompt, so);
  std::printf("\n---- sample (temperature %.2f, top-k %d) ----\n%s%s\n----\n", so.temperature,
              so.top_k, t.sample_prompt.c_str(), tok->decode(out).c_str());
}

}  // namespace braid
