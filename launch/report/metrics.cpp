// MetricsLog implementation.
#include "launch/report/metrics.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/atomic_file.h"
#include "core/error.h"
#include "launch/report/tensorboard.h"

namespace braid {

namespace {

// metrics.jsonl key -> TensorBoard tag, per event. MFU is a fraction in the file and a
// percentage in TensorBoard, where it is read off a plot.
struct TbScalar {
  const char* key;
  const char* tag;
  double scale;
};
constexpr TbScalar kTrainScalars[] = {
    {"loss", "train/loss", 1.0},
    {"lr", "train/lr", 1.0},
    {"grad_norm", "train/grad_norm", 1.0},
    {"tokens_per_s", "perf/tokens_per_s", 1.0},
    {"mfu", "perf/mfu_percent", 100.0},
    {"peak_tensor_mib", "memory/peak_tensor_mib", 1.0},
    {"peak_rss_mib", "memory/peak_rss_mib", 1.0},
};
constexpr TbScalar kEvalScalars[] = {{"val_loss", "val/loss", 1.0}};

}  // namespace

double unix_time_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

int supersede_metrics_after(const std::string& metrics_path, const std::string& superseded_path,
                            int64_t step) {
  std::ifstream in(metrics_path, std::ios::binary);
  if (!in) return 0;
  std::string kept, moved, line;
  int n = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    const bool later = j.is_object() && j.contains("step") && j["step"].is_number_integer() &&
                       j["step"].get<int64_t>() > step;
    (later ? moved : kept) += line + "\n";
    n += later ? 1 : 0;
  }
  if (n == 0) return 0;
  {
    std::ofstream out(superseded_path, std::ios::binary | std::ios::app);
    out << moved;
    out.flush();
    BRAID_USER_CHECK(out.good(), "cannot write {}", superseded_path);
  }
  write_file_atomic(metrics_path, kept);
  return n;
}

MetricsLog::MetricsLog(const std::string& run_dir, int64_t total_steps, int64_t resume_step)
    : total_steps_(total_steps), tty_(isatty(fileno(stdout)) != 0) {
  const std::string path = run_dir + "/metrics.jsonl";
  const int moved =
      supersede_metrics_after(path, run_dir + "/metrics.superseded.jsonl", resume_step);
  if (moved > 0)
    print(
        fmt::format("metrics: {} records past step {} (an earlier attempt) moved to "
                    "metrics.superseded.jsonl",
                    moved, resume_step));
  file_ = std::fopen(path.c_str(), "a");
  BRAID_USER_CHECK(file_ != nullptr, "cannot open {} for writing", path);
  tb_ = std::make_unique<TfEventsWriter>(run_dir);
  tb_->session_start(unix_time_now(), resume_step + 1);  // the first step this attempt logs
}

MetricsLog::~MetricsLog() {
  if (bar_shown_) std::fputs("\n", stdout);
  if (file_) std::fclose(file_);
}

const std::string& MetricsLog::tfevents_path() const { return tb_->path(); }

void MetricsLog::record(const std::string& event, nlohmann::json j) {
  const double now = unix_time_now();
  j["event"] = event;
  j["time"] = std::round(now * 1000.0) / 1000.0;  // milliseconds are plenty for a log
  const std::string s = j.dump() + "\n";
  std::fwrite(s.data(), 1, s.size(), file_);
  std::fflush(file_);

  auto scalars = [&](const auto& table) {
    std::vector<std::pair<std::string, float>> v;
    for (const TbScalar& t : table)
      if (j.contains(t.key) && j[t.key].is_number())
        v.emplace_back(t.tag, static_cast<float>(j[t.key].get<double>() * t.scale));
    if (!v.empty() && j.contains("step")) tb_->scalars(now, j["step"].get<int64_t>(), v);
  };
  if (event == "train") scalars(kTrainScalars);
  if (event == "eval") scalars(kEvalScalars);
}

void MetricsLog::print(const std::string& line) {
  if (bar_shown_) {
    std::fputs("\r\033[K", stdout);
    bar_shown_ = false;
  }
  std::fputs(line.c_str(), stdout);
  std::fputs("\n", stdout);
  std::fflush(stdout);
}

void MetricsLog::progress(int64_t step, double loss) {
  if (!tty_) return;
  const int width = 30;
  const double frac =
      total_steps_ > 0 ? static_cast<double>(step) / static_cast<double>(total_steps_) : 0.0;
  const int filled = static_cast<int>(frac * width);
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(width, '.');
  std::printf("\r\033[K[%s] %lld/%lld loss %.4f", bar.c_str(), static_cast<long long>(step),
              static_cast<long long>(total_steps_), loss);
  std::fflush(stdout);
  bar_shown_ = true;
}

std::string format_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  const long long t = static_cast<long long>(s + 0.5);
  if (t >= 3600) return fmt::format("{}h{:02d}m", t / 3600, static_cast<int>((t % 3600) / 60));
  if (t >= 60) return fmt::format("{}m{:02d}s", t / 60, static_cast<int>(t % 60));
  return fmt::format("{}s", t);
}

std::string format_si(double v, const char* unit) {
  const char* prefixes[] = {"", "k", "M", "G", "T", "P"};
  int i = 0;
  while (std::fabs(v) >= 1000.0 && i < 5) {
    v /= 1000.0;
    ++i;
  }
  return fmt::format("{:.3g} {}{}", v, prefixes[i], unit);
}

}  // namespace braid
