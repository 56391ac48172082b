// Training-loop records: kernel splits, memory, rank logs, resume checks.
#include "launch/train_log.h"

#include <sys/resource.h>

#include <algorithm>

#include "launch/config_json.h"
#include "data/file_util.h"
#include "launch/metrics.h"

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
    line += fmt::format(" {} {:.4f} ({:.0f}%) |", name, v, step_time > 0 ? 100.0 * s / step_time : 0.0);
  };
  for (int g = 0; g < kKernelGroups; ++g) part(kernel_group_name(static_cast<KernelGroup>(g)), k.seconds[g]);
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

}  // namespace braid
