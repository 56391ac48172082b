// Training-loop records: kernel splits, memory, rank logs, the run log, the metrics hook,
// resume checks.
#include "launch/train/train_log.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "data/file_util.h"
#include "launch/config/config_json.h"
#include "launch/report/metrics.h"
#include "launch/train/train_run.h"
#include "parallel/scalar_reduce.h"

namespace braid {

namespace fs = std::filesystem;

nlohmann::json kernel_seconds_json(const KernelTimes& k, double step_time, int64_t steps) {
  nlohmann::json j = nlohmann::json::object();
  if (steps <= 0) return j;
  for (int g = 0; g < kKernelGroups; ++g)
    j[kernel_group_name(static_cast<KernelGroup>(g))] = k.seconds[g] / static_cast<double>(steps);
  j["other"] = std::max(0.0, step_time - k.total()) / static_cast<double>(steps);
  return j;
}

std::string time_split_line(const KernelTimes& k, double step_time, int64_t steps) {
  const double per = step_time / static_cast<double>(steps);
  std::string line = fmt::format("time per step {:.4f} s:", per);
  auto part = [&](const char* name, double s) {
    const double v = s / static_cast<double>(steps);
    line +=
        fmt::format(" {} {:.4f} ({:.0f}%) |", name, v, step_time > 0 ? 100.0 * s / step_time : 0.0);
  };
  for (int g = 0; g < kKernelGroups; ++g)
    part(kernel_group_name(static_cast<KernelGroup>(g)), k.seconds[g]);
  part("other", std::max(0.0, step_time - k.total()));
  line.pop_back();
  line.pop_back();
  return line;
}

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

bool checkpoint_due(const CheckpointConfig& c, int64_t done, int64_t total, double minutes_since,
                    bool stopping) {
  if (stopping || done == total) return true;
  if (c.interval > 0 && done % c.interval == 0) return true;
  return c.interval_minutes > 0 && minutes_since >= c.interval_minutes;
}

RankLog::RankLog(const fs::path& run_dir, int rank) {
  if (rank < 0) return;
  fs::create_directories(run_dir / "logs");
  out_.open(run_dir / "logs" / fmt::format("rank-{}.log", rank), std::ios::app);
  BRAID_USER_CHECK(out_.good(), "cannot write {}", (run_dir / "logs").string());
}

void RankLog::line(const std::string& s) {
  if (out_.is_open()) out_ << fmt::format("[{:.3f}] {}", unix_time_now(), s) << std::endl;
}

void RunLog::open_rank_log(const fs::path& run_dir, int rank) { rank_.emplace(run_dir, rank); }

void RunLog::open_metrics(const fs::path& run_dir, int64_t total_steps, int64_t resume_step) {
  metrics_.emplace(run_dir.string(), total_steps, resume_step);
}

void RunLog::say(const std::string& line) {
  if (metrics_) metrics_->print(line);
  rank_line(line);
}

void RunLog::record(const std::string& event, nlohmann::json fields) {
  if (metrics_) metrics_->record(event, std::move(fields));
}

void RunLog::rank_line(const std::string& line) {
  if (rank_) rank_->line(line);
}

void RunLog::progress(int64_t step, double loss) {
  if (metrics_) metrics_->progress(step, loss);
}

namespace {

// "12.5/3.1%": every stage's bubble, in stage order.
std::string bubble_str(const std::vector<double>& b) {
  std::string s;
  for (double x : b) s += fmt::format("{}{:.1f}", s.empty() ? "" : "/", 100.0 * x);
  return s + "%";
}

}  // namespace

MetricsHook::MetricsHook(TrainRun& run) : run_(run), memory_(run.ctx->allocator()) {}

void MetricsHook::on_step_end(StepInfo& s) {
  window_kernels_ += s.kernels;
  train_kernels_ += s.kernels;
  window_time_ += s.seconds;
  train_time_ += s.seconds;
  window_busy_ += s.pipeline.busy_s;
  window_makespan_ += s.pipeline.makespan_s;
  window_loss_ += s.skipped ? 0.0 : s.loss;  // an overflowed loss would poison the window mean
  ++window_steps_;
  if (!s.skipped) ++window_loss_steps_;
  window_skipped_ += s.skipped ? 1 : 0;
  run_.log.progress(s.step, s.loss);
  if (s.step % run_.cfg.train.log_interval == 0 || s.step == run_.cfg.train.steps) end_window(s);
}

void MetricsHook::end_window(const StepInfo& s) {
  const int64_t done = s.step, total = run_.cfg.train.steps;
  const double step_s = window_time_ / window_steps_;
  const double mean_loss = window_loss_steps_ > 0 ? window_loss_ / window_loss_steps_ : NAN;
  const double tok_s = run_.tokens_per_step / step_s;
  const double flops = run_.flops_per_step / step_s;
  const double peak = run_.peak_flops_per_s;
  const double eta = step_s * static_cast<double>(total - done);
  const MemoryStats window_mem = memory_.end_window();  // this window's peaks
  const double mem_mib = static_cast<double>(window_mem.peak_total) / 1048576.0;
  const double act_mib =
      static_cast<double>(window_mem.peak_bytes[static_cast<int>(MemCategory::Activations)]) /
      1048576.0;
  // Every stage's bubble (1 - busy / makespan over the window), in stage order. Collective
  // over the pipeline group, so every stage reaches it at the same step.
  const int stages = run_.dims.pp_size(), stage = run_.dims.coord().pp;
  std::vector<double> v(static_cast<size_t>(2 * stages), 0.0);
  v[static_cast<size_t>(2 * stage)] = window_busy_;
  v[static_cast<size_t>(2 * stage + 1)] = window_makespan_;
  v = all_sum_doubles(run_.dims.pp(), v);
  std::vector<double> bubble;
  for (int i = 0; i < stages; ++i)
    bubble.push_back(v[2 * i + 1] > 0 ? 1.0 - v[2 * i] / v[2 * i + 1] : 0.0);
  const bool pipeline = stages > 1;
  run_.log.say(fmt::format(
      "step {:>6}/{}{} | loss {:.4f} | lr {:.2e} | grad norm {:.3f} | {:.0f} tok/s | {} | MFU {} | "
      "mem {:.0f} MiB (act {:.0f}){} | ETA {}",
      done, total, s.epoch > 0 ? fmt::format(" | epoch {}", s.epoch) : std::string(), mean_loss,
      s.lr, s.grad_norm, tok_s, format_si(flops, "FLOP/s"),
      run_.dims.lead() ? fmt::format("{:.1f}%", 100.0 * flops / peak) : std::string("n/a"), mem_mib,
      act_mib, pipeline ? " | bubble " + bubble_str(bubble) : std::string(), format_duration(eta)));
  nlohmann::json fields = {
      {"step", done},
      {"loss", mean_loss},
      {"lr", s.lr},
      {"grad_norm", s.grad_norm},
      {"tokens_per_s", tok_s},
      {"flops_per_s", flops},
      {"mfu", flops / peak},
      {"peak_tensor_mib", mem_mib},
      {"peak_memory_mib", peaks_mib_json(window_mem)},
      {"peak_rss_mib", peak_rss_mib()},
      {"memory_mib", memory_by_category_mib(run_.ctx->allocator().stats())},
      {"step_s", step_s},
      {"step_loss", s.loss},
      {"kernel_s", kernel_seconds_json(window_kernels_, window_time_, window_steps_)}};
  if (pipeline) fields["bubble"] = bubble;
  if (s.epoch > 0) fields["epoch"] = s.epoch;
  max_mfu_ = std::max(max_mfu_, flops / peak);
  run_.log.record("train", std::move(fields));
  if (run_.opt->scales_loss())
    run_.log.record(
        "loss_scale",
        {{"step", done}, {"scale", run_.opt->loss_scale()}, {"skipped_steps", window_skipped_}});
  window_time_ = window_loss_ = window_busy_ = window_makespan_ = 0.0;
  window_steps_ = window_loss_steps_ = window_skipped_ = 0;
  window_kernels_ = KernelTimes{};
}

void MetricsHook::on_train_end(const TrainSummary& summary) {
  const double wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - run_.started).count();
  run_.log.record(
      "end", {{"step", summary.final_step},
              {"train_seconds", train_time_},
              {"wall_seconds", wall_s},
              {"kernel_s", kernel_seconds_json(train_kernels_, train_time_, summary.steps_done)}});
  if (summary.steps_done > 0) {
    run_.log.say(time_split_line(train_kernels_, train_time_, summary.steps_done));
    run_.log.say("peak memory by category: " + memory_peaks_line(memory_.run_peaks()));
  }
  // A cached CPU peak below what the run computed was measured on a slower machine state.
  if (run_.dims.lead() && !run_.peak.cache_key.empty() && max_mfu_ > 1.0)
    run_.log.say(remeasure_cached_peak(*run_.ctx, run_.peak.cache_key, run_.peak.flops_per_s,
                                       max_mfu_ * run_.peak.flops_per_s, kPeakProbeSeconds));
}

}  // namespace braid
