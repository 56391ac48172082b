// Built-in accelerator table. Sources and the choice of each efficiency are in docs/plan.md.
#include "launch/plan/gpu_table.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"

namespace braid::plan {

namespace {

GpuSpec gpu(const char* name, const char* desc, double mem_gib, double fp32, double bf16,
            double fp16, double bw, double intra, double inter, double eff, int gpn,
            const char* source) {
  GpuSpec g;
  g.name = name;
  g.description = desc;
  g.memory_gib = mem_gib;
  g.tflops_fp32 = fp32;
  g.tflops_bf16 = bf16;
  g.tflops_fp16 = fp16;
  g.mem_bw_gbs = bw;
  g.intra_bw_gbs = intra;
  g.inter_bw_gbs = inter;
  g.matmul_efficiency = eff;
  g.gpus_per_node = gpn;
  g.source = source;
  return g;
}

// Memory is the total the driver reports (nvidia-smi / NVML "MiB", rocm-smi bytes), in GiB:
// an "80 GB" H100 reports 81,559 MiB (79.65 GiB), not 80e9 bytes (74.5 GiB). The part of it the
// runtime itself takes (CUDA context, library workspaces) is GpuSpec::overhead_gib, the
// "framework overhead" row of every plan. Sources per card in docs/plan.md.
constexpr double mib(double m) { return m / 1024.0; }

// A100: refitted (tools/fit_a100_efficiency.cpp, docs/plan.md "Validation") on the rows its
// constant was always chosen on, Megatron-LM 2021's weak scaling, after the data-parallel bandwidth
// began to count every NIC of a node: GEMMs 71.5 %, 6 bytes per stored activation byte.
GpuSpec ampere(GpuSpec g) {
  g.matmul_efficiency = 0.715;
  g.elementwise_touches = 6.0;
  return g;
}

// Hopper (H100 SXM/PCIe, H200): the three compute constants fitted by
// tools/fit_h100_efficiency.cpp --fit on the "fit" runs of tests/data/h100_runs.json (LLM Foundry
// MPT 1B-70B and Llama 3 405B at 8K, BF16 H100 SXM; docs/plan.md "H100 validation"): large
// GEMMs at 61.7 % of peak, FlashAttention-2-class attention at 33.4 %, memory-bound kernels moving
// 12.33 bytes per stored activation byte (an effective figure: unfused norms and casts, launch
// gaps). Only the SXM part is validated; the PCIe part and H200 share the chip and its kernels.
GpuSpec hopper(GpuSpec g) {
  g.matmul_efficiency = 0.617;
  g.attention_efficiency = 0.334;
  g.elementwise_touches = 12.33;
  // cuDNN's fused attention against FlashAttention-2 on an H100 SXM at head dim 128 and 4-8K
  // tokens (FlashAttention-3 paper, Shah et al. 2024, Figures 5-6): forward with causal mask 518
  // and 529 vs 319 and 333 TFLOP/s, backward 499 and 518 vs 310 and 318: 1.6x both ways.
  g.native_attention_speedup = 1.6;
  return g;
}

}  // namespace

std::string ascii_lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

const std::vector<GpuSpec>& gpu_table() {
  // Columns: memory GiB, fp32, bf16, fp16 dense TFLOP/s, HBM GB/s, intra-node GB/s per
  // direction, inter-node GB/s per GPU, large-GEMM efficiency, GPUs per node.
  static const std::vector<GpuSpec> table = {
      gpu("v100", "NVIDIA V100 SXM2 32GB, NVLink2", mib(32510), 15.7, 0, 125, 900, 150, 12.5, 0.75,
          8, "NVIDIA V100 datasheet"),
      ampere(gpu("a100-40gb", "NVIDIA A100 SXM4 40GB, NVLink3", mib(40960), 19.5, 312, 312, 1555,
                 300, 25, 0, 8, "NVIDIA A100 datasheet")),
      ampere(gpu("a100-80gb", "NVIDIA A100 SXM4 80GB, NVLink3", mib(81920), 19.5, 312, 312, 2039,
                 300, 25, 0, 8, "NVIDIA A100 datasheet")),
      hopper(gpu("h100-sxm", "NVIDIA H100 SXM5 80GB, NVLink4", mib(81559), 66.9, 989.4, 989.4, 3350,
                 450, 50, 0, 8, "NVIDIA H100 datasheet")),
      hopper(gpu("h100-pcie", "NVIDIA H100 PCIe 80GB, PCIe Gen5", mib(81559), 51.2, 756.5, 756.5,
                 2000, 64, 50, 0, 8, "NVIDIA H100 datasheet")),
      // The NVL part: same chip, lower clocks and power (350-400 W); pairs joined by an NVLink
      // bridge, the rest of a node over PCIe Gen5 (what a ring across pairs runs at).
      hopper(gpu("h100-nvl", "NVIDIA H100 NVL 94GB, PCIe Gen5 (NVLink bridge per pair)", mib(95830),
                 60, 835.5, 835.5, 3938, 64, 50, 0, 8,
                 "NVIDIA H100 datasheet, NVL column (dense = half the sparse figure)")),
      hopper(gpu("h200", "NVIDIA H200 SXM 141GB, NVLink4", mib(143771), 66.9, 989.4, 989.4, 4800,
                 450, 50, 0, 8, "NVIDIA H200 datasheet")),
      gpu("b200", "NVIDIA B200 180GB (HGX), NVLink5", mib(183359), 75, 2250, 2250, 8000, 900, 50,
          0.70, 8, "NVIDIA HGX B200 datasheet (dense = half the sparse figure)"),
      gpu("l40s", "NVIDIA L40S 48GB, PCIe Gen4", mib(46068), 91.6, 362, 362, 864, 32, 12.5, 0.65, 8,
          "NVIDIA L40S datasheet"),
      gpu("rtx3090", "NVIDIA GeForce RTX 3090 24GB, PCIe Gen4", mib(24576), 35.6, 71, 71, 936, 32,
          12.5, 0.80, 4, "NVIDIA Ampere GA102 whitepaper (fp32 accumulate)"),
      gpu("rtx4090", "NVIDIA GeForce RTX 4090 24GB, PCIe Gen4 (no P2P)", mib(24564), 82.6, 165.2,
          165.2, 1008, 25, 12.5, 0.80, 4, "NVIDIA Ada AD102 whitepaper (fp32 accumulate)"),
      gpu("rtx5090", "NVIDIA GeForce RTX 5090 32GB, PCIe Gen5 (no P2P)", mib(32607), 104.8, 209.5,
          209.5, 1792, 32, 12.5, 0.80, 4,
          "NVIDIA Blackwell GB202 (RTX 5090) specifications (fp32 accumulate: half the fp16-"
          "accumulate 419 TFLOP/s)"),
      gpu("mi250x", "AMD Instinct MI250X, one GCD (64GB) as frameworks see it", mib(65520), 47.9,
          191.5, 191.5, 1638, 50, 12.5, 0.55, 8, "AMD MI250X datasheet (package figures / 2)"),
      gpu("mi300x", "AMD Instinct MI300X 192GB, Infinity Fabric", mib(196288), 163.4, 1307.4,
          1307.4, 5300, 448, 50, 0.50, 8, "AMD MI300X datasheet"),
      gpu("k100", "Hygon DCU K100 64GB", mib(65536), 49, 196, 196, 896, 32, 25, 0.55, 8,
          "press reports of the K100 AI; approximate"),
  };
  return table;
}

DeviceProfile find_device(const std::string& name) {
  if (name.size() > 5 && name.ends_with(".json")) return load_device_profile(name);
  std::string n = ascii_lower(name);
  static const std::pair<const char*, const char*> kAliases[] = {
      {"a100", "a100-80gb"},   {"a100-80", "a100-80gb"}, {"a100-40", "a100-40gb"},
      {"h100", "h100-sxm"},    {"rtx-3090", "rtx3090"},  {"rtx-4090", "rtx4090"},
      {"rtx-5090", "rtx5090"}, {"h200-sxm", "h200"}};
  for (const auto& [alias, real] : kAliases)
    if (n == alias) n = real;
  for (const GpuSpec& g : gpu_table())
    if (g.name == n) return {g, CpuProfile{}, ""};
  std::string names;
  for (const GpuSpec& g : gpu_table()) names += (names.empty() ? "" : ", ") + g.name;
  user_error(
      "unknown GPU '{}'; expected one of: {} (or a device profile .json from "
      "`braid plan --calibrate`)",
      name, names);
}

GpuSpec find_gpu(const std::string& name) { return find_device(name).gpu; }

double peak_tflops(const GpuSpec& gpu, Precision precision) {
  const double t = precision == Precision::BF16   ? gpu.tflops_bf16
                   : precision == Precision::FP16 ? gpu.tflops_fp16
                                                  : gpu.tflops_fp32;
  if (!(t > 0))
    user_error("{} has no {} rate in the table; use another --precision", gpu.name,
               enum_name(precision));
  return t;
}

namespace {

// A calibrated rate table: [{"<key_name>": 512, "<value_name>": 0.11}, ...] (value "tflops" or
// "gbs").
nlohmann::json rates_json(const std::vector<RatePoint>& pts, const char* key_name,
                          const char* value_name = "tflops") {
  nlohmann::json a = nlohmann::json::array();
  for (const RatePoint& p : pts) a.push_back({{key_name, p.key}, {value_name, p.rate}});
  return a;
}

void read_rates(const nlohmann::json& j, const char* field, const char* key_name,
                std::vector<RatePoint>& out, const std::string& path,
                const char* value_name = "tflops") {
  if (!j.contains(field)) return;
  try {
    for (const auto& e : j.at(field)) {
      RatePoint p{e.at(key_name).get<double>(), e.at(value_name).get<double>()};
      if (!(p.key > 0 && p.rate > 0))
        user_error("device profile '{}': {} has {}={} {}={}; expected both > 0", path, field,
                   key_name, p.key, value_name, p.rate);
      out.push_back(p);
    }
  } catch (const nlohmann::json::exception&) {
    user_error("device profile '{}': {} must be a list of {{\"{}\": number, \"{}\": number}}", path,
               field, key_name, value_name);
  }
}

// The side tables: a rate table measured around one reference shape, stored with it.
struct SideTable {
  const char* field;     // JSON key of the table
  const char* key_name;  // JSON key of each point's shape
  std::vector<RatePoint> CpuProfile::*table;
  const char* ref_field;  // JSON key of the reference shape
  double CpuProfile::*ref;
};
constexpr SideTable kSideTables[] = {
    {"attention_seq_tflops", "seq", &CpuProfile::attention_by_seq, "attention_ref_seq",
     &CpuProfile::attention_ref_seq},
    {"attention_width_tflops", "n_embd", &CpuProfile::attention_by_width, "attention_ref_width",
     &CpuProfile::attention_ref_width},
    {"gemm_f32_train_tokens_tflops", "tokens", &CpuProfile::gemm_by_tokens, "gemm_ref_tokens",
     &CpuProfile::gemm_ref_tokens},
    {"lm_head_vocab_tflops", "vocab", &CpuProfile::lm_head_by_vocab, "lm_head_ref_vocab",
     &CpuProfile::lm_head_ref_vocab}};

}  // namespace

DeviceProfile load_device_profile(const std::string& path) {
  std::ifstream in(path);
  if (!in) user_error("cannot open device profile '{}'", path);
  nlohmann::json j;
  try {
    in >> j;
  } catch (const std::exception& e) {
    user_error("device profile '{}' is not valid JSON: {}", path, e.what());
  }
  DeviceProfile profile;
  GpuSpec& g = profile.gpu;
  CpuProfile& k = profile.cpu;
  auto get = [&](const char* key, auto& field, bool required) {
    if (!j.contains(key)) {
      if (required) user_error("device profile '{}' lacks the key '{}'", path, key);
      return;
    }
    try {
      j.at(key).get_to(field);
    } catch (const std::exception&) {
      user_error("device profile '{}': key '{}' has the wrong type", path, key);
    }
  };
  get("name", g.name, true);
  get("description", g.description, false);
  get("memory_gib", g.memory_gib, true);
  get("tflops_fp32", g.tflops_fp32, true);
  get("tflops_bf16", g.tflops_bf16, false);
  get("tflops_fp16", g.tflops_fp16, false);
  get("mem_bw_gbs", g.mem_bw_gbs, true);
  get("intra_bw_gbs", g.intra_bw_gbs, true);
  get("inter_bw_gbs", g.inter_bw_gbs, true);
  get("matmul_efficiency", g.matmul_efficiency, false);
  get("attention_efficiency", g.attention_efficiency, false);
  get("elementwise_touches", g.elementwise_touches, false);
  get("native_attention_speedup", g.native_attention_speedup, false);
  get("overhead_gib", g.overhead_gib, false);
  get("gpus_per_node", g.gpus_per_node, false);
  get("source", g.source, false);
  get("device", profile.device, false);
  read_rates(j, "gemm_f32_train_tflops", "n_embd", k.gemm_by_width, path);
  read_rates(j, "gemm_f32_train_llama_tflops", "n_embd", k.gemm_llama_by_width, path);
  read_rates(j, "attention_gqa4_tflops", "head_dim", k.attention_gqa_by_head_dim, path);
  read_rates(j, "attention_tflops", "head_dim", k.attention_by_head_dim, path);
  read_rates(j, "lm_head_ce_tflops", "n_embd", k.lm_head_by_width, path);
  for (const SideTable& s : kSideTables) {
    read_rates(j, s.field, s.key_name, k.*s.table, path);
    get(s.ref_field, k.*s.ref, false);
    if (!(k.*s.table).empty() && !(k.*s.ref > 0))
      user_error("device profile '{}': {} needs {} > 0", path, s.field, s.ref_field);
  }
  read_rates(j, "optimizer_gbs", "params", k.optimizer_by_params, path, "gbs");
  read_rates(j, "block_elementwise_gbs", "n_embd", k.block_elementwise_by_width, path, "gbs");
  read_rates(j, "block_elementwise_llama_gbs", "n_embd", k.block_elementwise_llama_by_width, path,
             "gbs");
  get("elementwise_gbs", k.elementwise_gbs, false);
  get("gelu_gelems", k.gelu_gelems, false);
  get("swiglu_gelems", k.swiglu_gelems, false);
  get("kernel_call_us", k.kernel_call_us, false);
  get("comm_bus_gbs", k.comm_bus_gbs, false);
  get("comm_latency_us", k.comm_latency_us, false);
  get("threads", k.threads, false);
  if (k.comm_bus_gbs < 0 || k.comm_latency_us < 0)
    user_error("device profile '{}': comm_bus_gbs and comm_latency_us must be >= 0", path);
  if (!(g.memory_gib > 0 && g.tflops_fp32 > 0 && g.mem_bw_gbs > 0))
    user_error("device profile '{}': memory_gib, tflops_fp32 and mem_bw_gbs must be > 0", path);
  if (!(g.matmul_efficiency > 0 && g.matmul_efficiency <= 1))
    user_error("device profile '{}': matmul_efficiency is {}; expected in (0, 1]", path,
               g.matmul_efficiency);
  if (!(g.attention_efficiency >= 0 && g.attention_efficiency <= 1))
    user_error(
        "device profile '{}': attention_efficiency is {}; expected in [0, 1] (0: as "
        "matmul_efficiency)",
        path, g.attention_efficiency);
  if (!(g.elementwise_touches >= 0))
    user_error("device profile '{}': elementwise_touches is {}; expected >= 0", path,
               g.elementwise_touches);
  if (!(g.native_attention_speedup >= 1))
    user_error("device profile '{}': native_attention_speedup is {}; expected >= 1", path,
               g.native_attention_speedup);
  return profile;
}

void save_device_profile(const DeviceProfile& profile, const std::string& path) {
  const GpuSpec& g = profile.gpu;
  const CpuProfile& k = profile.cpu;
  nlohmann::json j = {{"name", g.name},
                      {"description", g.description},
                      {"memory_gib", g.memory_gib},
                      {"tflops_fp32", g.tflops_fp32},
                      {"tflops_bf16", g.tflops_bf16},
                      {"tflops_fp16", g.tflops_fp16},
                      {"mem_bw_gbs", g.mem_bw_gbs},
                      {"intra_bw_gbs", g.intra_bw_gbs},
                      {"inter_bw_gbs", g.inter_bw_gbs},
                      {"matmul_efficiency", g.matmul_efficiency},
                      {"attention_efficiency", g.attention_efficiency},
                      {"elementwise_touches", g.elementwise_touches},
                      {"native_attention_speedup", g.native_attention_speedup},
                      {"overhead_gib", g.overhead_gib},
                      {"gpus_per_node", g.gpus_per_node},
                      {"source", g.source}};
  if (!profile.device.empty()) j["device"] = profile.device;
  if (!k.gemm_by_width.empty()) j["gemm_f32_train_tflops"] = rates_json(k.gemm_by_width, "n_embd");
  if (!k.gemm_llama_by_width.empty())
    j["gemm_f32_train_llama_tflops"] = rates_json(k.gemm_llama_by_width, "n_embd");
  if (!k.attention_gqa_by_head_dim.empty())
    j["attention_gqa4_tflops"] = rates_json(k.attention_gqa_by_head_dim, "head_dim");
  if (!k.attention_by_head_dim.empty())
    j["attention_tflops"] = rates_json(k.attention_by_head_dim, "head_dim");
  if (!k.lm_head_by_width.empty())
    j["lm_head_ce_tflops"] = rates_json(k.lm_head_by_width, "n_embd");
  for (const SideTable& s : kSideTables) {
    if ((k.*s.table).empty()) continue;
    j[s.field] = rates_json(k.*s.table, s.key_name);
    j[s.ref_field] = k.*s.ref;
  }
  if (!k.optimizer_by_params.empty())
    j["optimizer_gbs"] = rates_json(k.optimizer_by_params, "params", "gbs");
  if (!k.block_elementwise_by_width.empty())
    j["block_elementwise_gbs"] = rates_json(k.block_elementwise_by_width, "n_embd", "gbs");
  if (!k.block_elementwise_llama_by_width.empty())
    j["block_elementwise_llama_gbs"] =
        rates_json(k.block_elementwise_llama_by_width, "n_embd", "gbs");
  if (k.elementwise_gbs > 0) j["elementwise_gbs"] = k.elementwise_gbs;
  if (k.gelu_gelems > 0) j["gelu_gelems"] = k.gelu_gelems;
  if (k.swiglu_gelems > 0) j["swiglu_gelems"] = k.swiglu_gelems;
  if (k.kernel_call_us > 0) j["kernel_call_us"] = k.kernel_call_us;
  if (k.threads > 0) j["threads"] = k.threads;
  if (k.comm_bus_gbs > 0) {
    j["comm_bus_gbs"] = k.comm_bus_gbs;
    j["comm_latency_us"] = k.comm_latency_us;
  }
  write_file_atomic(path, j.dump(2) + "\n");
}

}  // namespace braid::plan
