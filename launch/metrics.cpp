// MetricsLog implementation.
#include "launch/metrics.h"

#include <unistd.h>

#include <cmath>

#include "core/error.h"

namespace braid {

MetricsLog::MetricsLog(const std::string& run_dir, int64_t total_steps)
    : total_steps_(total_steps), tty_(isatty(fileno(stdout)) != 0) {
  const std::string path = run_dir + "/metrics.jsonl";
  file_ = std::fopen(path.c_str(), "a");
  BRAID_USER_CHECK(file_ != nullptr, "cannot open {} for writing", path);
}

MetricsLog::~MetricsLog() {
  if (bar_shown_) std::fputs("\n", stdout);
  if (file_) std::fclose(file_);
}

void MetricsLog::record(const nlohmann::json& j) {
  const std::string s = j.dump() + "\n";
  std::fwrite(s.data(), 1, s.size(), file_);
  std::fflush(file_);
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
  const double frac = total_steps_ > 0 ? static_cast<double>(step) / static_cast<double>(total_steps_) : 0.0;
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
