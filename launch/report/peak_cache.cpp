// peak.json: measured GEMM peaks by machine key, read and written atomically.
#include "launch/report/peak_cache.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/kernels/cuda/runtime.h"
#include "core/kernels/gemm.h"
#include "launch/plan/gpu_profile.h"
#include "launch/plan/gpu_table.h"

namespace braid {

namespace fs = std::filesystem;

namespace {

fs::path cache_path() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x)
    return fs::path(x) / "braid" / "peak.json";
  if (const char* h = std::getenv("HOME"); h && *h)
    return fs::path(h) / ".cache" / "braid" / "peak.json";
  return {};
}

nlohmann::json read_cache(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return nlohmann::json::object();
  std::ostringstream s;
  s << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(s.str(), nullptr, /*allow_exceptions=*/false);
  return j.is_object() ? j : nlohmann::json::object();  // damaged: measured again, rewritten
}

// Sets cache[key] and writes the cache atomically; the error, or "" when it was written.
std::string store_entry(const fs::path& path, nlohmann::json& cache, const std::string& key,
                        double flops_per_s, double probe_seconds) {
  cache[key] = {{"flops_per_s", flops_per_s}, {"probe_seconds", probe_seconds}};
  try {
    std::error_code ec;
    fs::create_directories(path.parent_path(), ec);
    write_file_atomic(path.string(), cache.dump(2) + "\n");
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

std::string peak_cache_key(const MachineInfo& m) {
  std::string key = fmt::format("{} | {} threads | {}", m.cpu_model, m.threads, m.gemm_backend);
  if (!m.isa_cap.empty()) key += " | ONEDNN_MAX_CPU_ISA=" + m.isa_cap;
  return key;
}

PeakChoice gpu_peak(const ExecContext& ctx, Precision precision) {
  const cuda::DeviceProps props = cuda::device_props(ctx.device().index);
  const plan::GpuSpec* g = plan::table_gpu_for_device(
      props.name, static_cast<double>(props.total_bytes) / (1024.0 * 1024.0 * 1024.0));
  if (!g)
    return {1e30, fmt::format("{} is not in braid's GPU table; set train.peak_tflops for MFU",
                              props.name)};
  const double tf = plan::peak_tflops(*g, precision);
  return {tf * 1e12, fmt::format("the published dense {} peak of {} ({})", enum_name(precision),
                                 g->name, props.name)};
}

PeakChoice choose_mfu_peak(ExecContext& ctx, double peak_tflops, const MachineInfo& m,
                           double probe_seconds, Precision precision) {
  if (peak_tflops > 0) return {peak_tflops * 1e12, "train.peak_tflops"};
  if (!ctx.device().is_cpu()) return gpu_peak(ctx, precision);
  const fs::path path = cache_path();
  const std::string key = peak_cache_key(m);
  nlohmann::json cache = path.empty() ? nlohmann::json::object() : read_cache(path);
  if (cache.contains(key) && cache[key].is_object() && cache[key].contains("flops_per_s") &&
      cache[key]["flops_per_s"].is_number() && cache[key]["flops_per_s"].get<double>() > 0)
    return {cache[key]["flops_per_s"].get<double>(),
            fmt::format("f32 GEMM peak cached in {} for \"{}\"; delete the entry to measure again",
                        path.string(), key),
            key};
  const double measured = measure_gemm_peak_f32(ctx, probe_seconds);
  if (path.empty()) return {measured, "f32 GEMM peak measured now (no HOME to cache it in)"};
  if (const std::string err = store_entry(path, cache, key, measured, probe_seconds); !err.empty())
    return {measured, fmt::format("f32 GEMM peak measured now; not cached ({})", err)};
  return {measured, fmt::format("f32 GEMM peak measured now, cached in {}", path.string())};
}

std::string remeasure_cached_peak(ExecContext& ctx, const std::string& key, double cached,
                                  double observed, double probe_seconds) {
  const double measured = measure_gemm_peak_f32(ctx, probe_seconds);
  const double best = std::max(cached, measured);
  std::string line = fmt::format(
      "MFU above 100 %: this run reached {:.1f} GFLOP/s per rank, above the cached f32 GEMM peak "
      "of {:.1f} (measured when the machine was slower); measured again: {:.1f} GFLOP/s",
      observed / 1e9, cached / 1e9, measured / 1e9);
  const fs::path path = cache_path();
  if (path.empty()) return line;
  nlohmann::json cache = read_cache(path);
  if (const std::string err = store_entry(path, cache, key, best, probe_seconds); !err.empty())
    return line + fmt::format("; not cached ({})", err);
  return line +
         fmt::format("; the next runs divide by {:.1f} (cached in {})", best / 1e9, path.string());
}

}  // namespace braid
