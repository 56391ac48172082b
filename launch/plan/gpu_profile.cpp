// A GPU's device profile from its measurements (see gpu_profile.h).
#include "launch/plan/gpu_profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>

#include "core/error.h"
#include "launch/plan/gpu_table.h"

namespace braid::plan {

namespace {

bool has(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

}  // namespace

Device parse_calibrate_device(const std::string& value) {
  if (value == "cpu") return Device::cpu();
  if (value == "cuda") return Device::cuda(0);
  if (value.starts_with("cuda:")) {
    const char* first = value.data() + 5;
    const char* last = value.data() + value.size();
    int index = -1;
    const auto [end, ec] = std::from_chars(first, last, index);
    if (ec == std::errc() && end == last && first != last && index >= 0)
      return Device::cuda(index);
  }
  user_error("--device '{}' is not a device; expected cpu, cuda or cuda:N (N >= 0)", value);
}

const GpuSpec* table_gpu_for_device(const std::string& device_name, double total_gib) {
  const std::string n = ascii_lower(device_name);
  std::string kind;
  if (has(n, "h200"))
    kind = "h200";
  else if (has(n, "h100"))
    kind = has(n, "pcie") ? "h100-pcie" : has(n, "nvl") ? "h100-nvl" : "h100-sxm";
  else if (has(n, "a100"))
    kind = total_gib > 60 ? "a100-80gb" : "a100-40gb";
  else if (has(n, "l40s"))
    kind = "l40s";
  else if (has(n, "v100"))
    kind = "v100";
  else if (has(n, "3090"))
    kind = "rtx3090";
  else if (has(n, "4090"))
    kind = "rtx4090";
  else if (has(n, "5090"))
    kind = "rtx5090";
  for (const GpuSpec& g : gpu_table())
    if (!kind.empty() && g.name == kind) return &g;
  return nullptr;
}

DeviceProfile gpu_profile_from_measurements(const GpuMeasurements& m) {
  BRAID_CHECK(m.gemm_f32_flops > 0 && m.gemm_bf16_flops > 0 && m.copy_bytes_per_s > 0,
              "GPU calibration of {} without GEMM or copy rates", m.device_name);
  DeviceProfile out;
  out.device = "cuda";
  out.cpu = m.kernels;
  out.cpu.threads = 0;  // not an OpenMP figure on a GPU
  GpuSpec& g = out.gpu;
  const double total_gib = m.total_bytes / kGiB;
  g.name = m.device_name;
  g.memory_gib = total_gib;
  g.tflops_fp32 = m.gemm_f32_flops / 1e12;
  g.tflops_bf16 = m.gemm_bf16_flops / 1e12;
  g.tflops_fp16 = 0;  // not measured
  g.mem_bw_gbs = m.copy_bytes_per_s / 1e9;
  g.matmul_efficiency = 1.0;
  g.attention_efficiency = 0;
  const GpuSpec* card = table_gpu_for_device(m.device_name, total_gib);
  std::string links;
  if (card) {
    g.intra_bw_gbs = card->intra_bw_gbs;
    g.inter_bw_gbs = card->inter_bw_gbs;
    g.gpus_per_node = card->gpus_per_node;
    g.native_attention_speedup = card->native_attention_speedup;
    g.elementwise_touches = card->elementwise_touches;
    g.overhead_gib = card->overhead_gib;
    links = fmt::format(
        "links not measured: intra-node {:g} GB/s, inter-node {:g} GB/s and {} GPUs per node "
        "are the built-in table's {}",
        card->intra_bw_gbs, card->inter_bw_gbs, card->gpus_per_node, card->name);
  } else {
    g.intra_bw_gbs = 0;
    g.inter_bw_gbs = 0;
    g.gpus_per_node = std::max(1, m.gpus_visible);
    links =
        "links not measured and the card is not in the built-in table: give --intra-bw and "
        "--inter-bw to plan more than one GPU";
  }
  g.description = fmt::format(
      "{} (cuda:{}, sm_{}{}, {} SMs, {:.1f} GiB, {:.1f} GiB free at calibration), measured by "
      "braid plan --calibrate --device cuda; {}",
      m.device_name, m.index, m.major, m.minor, m.multiprocessors, total_gib, m.free_bytes / kGiB,
      links);
  g.source = fmt::format(
      "measured: gemm {}^3 f32 {:.1f} and bf16 {:.1f} TFLOP/s (cuBLASLt), device copy {} MiB "
      "{:.0f} GB/s; {}",
      m.gemm_size, g.tflops_fp32, g.tflops_bf16, static_cast<int64_t>(m.copy_bytes) >> 20,
      g.mem_bw_gbs, m.timing);
  return out;
}

}  // namespace braid::plan
