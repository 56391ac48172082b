// Machine measurements for the device profile (the planner's only kernel calls).
#include "launch/calibrate/calibrate.h"

#include <fmt/format.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "core/error.h"
#include "core/kernels/cuda/runtime.h"
#include "core/kernels/gemm.h"
#include "launch/calibrate/probes.h"
#include "launch/plan/gpu_profile.h"

namespace braid::plan {

using namespace probes;

namespace {

// The probes both devices run, by table.
struct ProbeSet {
  size_t f32 = 0, bf16 = 0, copy = 0, elem = 0, gelu = 0, swiglu = 0, call = 0;
  std::vector<size_t> attn, attn_gqa, attn_seq, attn_width, lm, lm_vocab, opt;
  std::vector<BlockProbe> block, block_llama, block_tokens;
};

ProbeSet add_probes(Probes& probes, const CalibrateOptions& opt) {
  ProbeSet s;
  s.f32 = add_square_gemm_probe(probes, opt.gemm_size, false);
  s.bf16 = add_square_gemm_probe(probes, opt.gemm_size, true);
  s.copy = add_copy_probe(probes, opt.copy_bytes);
  const int64_t N = opt.tokens;
  for (int w : opt.gemm_widths) {
    s.block.push_back(add_block_probe(probes, N, w, false));
    s.block_llama.push_back(add_block_probe(probes, N, w, true));
  }
  for (int t : opt.gemm_token_counts)
    s.block_tokens.push_back(add_block_probe(probes, t, opt.gemm_tokens_width, false));
  for (int d : opt.head_dims) {
    s.attn.push_back(add_attention_probe(probes, N, opt.attention_seq, d, 1, opt.attention_width));
    s.attn_gqa.push_back(
        add_attention_probe(probes, N, opt.attention_seq, d, 4, opt.attention_width));
  }
  for (int t : opt.attention_seqs)
    s.attn_seq.push_back(
        add_attention_probe(probes, N, t, opt.attention_sides_head_dim, 1, opt.attention_width));
  for (int w : opt.attention_widths)
    s.attn_width.push_back(
        add_attention_probe(probes, N, opt.attention_seq, opt.attention_sides_head_dim, 1, w));
  for (int w : opt.lm_head_widths)
    s.lm.push_back(add_lm_head_probe(probes, N, w, opt.lm_head_ref_vocab));
  for (int v : opt.lm_head_vocabs)
    s.lm_vocab.push_back(add_lm_head_probe(probes, N, opt.lm_head_vocabs_width, v));
  s.elem = add_elementwise_probe(probes, N);
  s.gelu = add_activation_probe(probes, N, false);
  s.swiglu = add_activation_probe(probes, N, true);
  s.call = add_call_probe(probes);
  for (int64_t n : opt.optimizer_params) s.opt.push_back(add_optimizer_probe(probes, n));
  return s;
}

// The kernel tables from the probes' rates (the same on either device).
CpuProfile kernel_tables(const Probes& probes, const ProbeSet& s, const CalibrateOptions& opt) {
  CpuProfile k;
  auto table = [&](const std::vector<int>& keys, const std::vector<size_t>& idx) {
    std::vector<RatePoint> t;
    for (size_t i = 0; i < keys.size(); ++i)
      t.push_back({double(keys[i]), probes.rate(idx[i]) / 1e12});
    return t;
  };
  // GEMM (TFLOP/s) or element-wise (GB/s) rates of block probes, keyed by `keys`.
  auto block_table = [&](const std::vector<int>& keys, const std::vector<BlockProbe>& ps,
                         bool gemm) {
    std::vector<RatePoint> t;
    for (size_t i = 0; i < ps.size(); ++i) {
      const BlockProbe& b = ps[i];
      const double r =
          gemm ? b.gemm_flops * probes.group_rate(b.index, KernelGroup::Gemm) / 1e12
               : b.elementwise_bytes * probes.group_rate(b.index, KernelGroup::Elementwise) / 1e9;
      t.push_back({double(keys[i]), r});
    }
    return t;
  };
  k.gemm_by_width = block_table(opt.gemm_widths, s.block, true);
  k.gemm_llama_by_width = block_table(opt.gemm_widths, s.block_llama, true);
  k.block_elementwise_by_width = block_table(opt.gemm_widths, s.block, false);
  k.block_elementwise_llama_by_width = block_table(opt.gemm_widths, s.block_llama, false);
  k.gemm_by_tokens = block_table(opt.gemm_token_counts, s.block_tokens, true);
  k.gemm_ref_tokens = static_cast<double>(opt.tokens);
  k.attention_by_head_dim = table(opt.head_dims, s.attn);
  k.attention_gqa_by_head_dim = table(opt.head_dims, s.attn_gqa);
  k.attention_by_seq = table(opt.attention_seqs, s.attn_seq);
  k.attention_ref_seq = opt.attention_seq;
  k.attention_by_width = table(opt.attention_widths, s.attn_width);
  k.attention_ref_width = opt.attention_width;
  k.lm_head_by_width = table(opt.lm_head_widths, s.lm);
  k.lm_head_by_vocab = table(opt.lm_head_vocabs, s.lm_vocab);
  k.lm_head_ref_vocab = opt.lm_head_ref_vocab;
  for (size_t i = 0; i < s.opt.size(); ++i)
    k.optimizer_by_params.push_back({double(opt.optimizer_params[i]), probes.rate(s.opt[i]) / 1e9});
  k.elementwise_gbs = probes.rate(s.elem) / 1e9;
  k.gelu_gelems = probes.rate(s.gelu) / 1e9;
  k.swiglu_gelems = probes.rate(s.swiglu) / 1e9;
  // One call's fixed cost: its time less the bytes it moves (r a, r b, w a) at the element-wise
  // rate.
  const double call_s = probes.seconds_per_call(s.call) / 100.0;
  k.kernel_call_us =
      std::max(0.0, call_s - 12.0 * kCallProbeFloats / (k.elementwise_gbs * 1e9)) * 1e6;
  return k;
}

std::string timing_text(const Probes::RunReport& rep, const CalibrateOptions& opt,
                        Clock::time_point start) {
  return fmt::format("kernels at {} tokens; {} interleaved rounds, {:.1f} s in all", opt.tokens,
                     rep.rounds, seconds_since(start));
}

CalibrationRun calibrate_gpu(const CalibrateOptions& opt, Device device) {
  const auto start = Clock::now();
  const int gpus = cuda::device_count();
  if (gpus == 0)
    user_error("--calibrate --device {}: no GPU can be used: {}; calibrate this CPU with "
               "--device cpu, or run on a machine with a GPU and braid's CUDA backend",
               opt.device, cuda::unavailable_reason());
  if (device.index >= gpus)
    user_error("--calibrate --device {}: {} GPU(s) are visible (cuda:0 to cuda:{})", opt.device,
               gpus, gpus - 1);
  const cuda::DeviceProps props = cuda::device_props(device.index);
  Probes probes(device);  // makes the device current
  GpuMeasurements m;
  m.index = device.index;
  m.device_name = props.name;
  m.major = props.major;
  m.minor = props.minor;
  m.multiprocessors = props.multiprocessors;
  m.gpus_visible = gpus;
  size_t free_bytes = 0, total_bytes = 0;
  cuda::mem_get_info(&free_bytes, &total_bytes);
  m.free_bytes = static_cast<double>(free_bytes);
  m.total_bytes = static_cast<double>(total_bytes);
  const ProbeSet s = add_probes(probes, opt);
  const Probes::RunReport rep = probes.run(opt.rounds, opt.total_seconds, start);
  m.gemm_size = opt.gemm_size;
  m.gemm_f32_flops = probes.rate(s.f32);
  m.gemm_bf16_flops = probes.rate(s.bf16);
  m.copy_bytes = static_cast<double>(opt.copy_bytes);
  m.copy_bytes_per_s = probes.rate(s.copy);
  m.kernels = kernel_tables(probes, s, opt);
  m.timing = timing_text(rep, opt, start);
  CalibrationRun out;
  out.profile = gpu_profile_from_measurements(m);
  out.rounds = rep.rounds;
  out.floor_s = rep.floor_s;
  out.elapsed_s = seconds_since(start);
  return out;
}

}  // namespace

CalibrationRun calibrate_machine(const CalibrateOptions& opt) {
  const Device device = parse_calibrate_device(opt.device);
  if (!device.is_cpu()) return calibrate_gpu(opt, device);
  const auto start = Clock::now();
  Probes probes;
  const ProbeSet s = add_probes(probes, opt);
  const Probes::RunReport rep = probes.run(opt.rounds, opt.total_seconds, start);

  CalibrationRun out;
  out.profile.device = "cpu";
  GpuSpec& g = out.profile.gpu;
  g.name = "cpu-calibrated";
  g.description = "this machine, measured by braid plan --calibrate (" +
                  gemm_backend_name(probes.ctx().gemm()) + ")";
  const double pages = static_cast<double>(sysconf(_SC_PHYS_PAGES));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  g.memory_gib = pages * page / (1024.0 * 1024.0 * 1024.0);
  g.tflops_fp32 = probes.rate(s.f32) / 1e12;
  g.tflops_bf16 = probes.rate(s.bf16) / 1e12;
  g.tflops_fp16 = 0;
  const double bw_gbs = probes.rate(s.copy) / 1e9;
  g.mem_bw_gbs = bw_gbs;
  g.intra_bw_gbs = bw_gbs / 2;  // one copy moves data in one direction
  g.inter_bw_gbs = bw_gbs / 2;
  g.matmul_efficiency = 1.0;
  g.overhead_gib = 0.25;
  g.gpus_per_node = 1;
  out.profile.cpu = kernel_tables(probes, s, opt);
  out.profile.cpu.threads = omp_get_max_threads();  // the rates are per process at this many
  g.source = fmt::format("measured: gemm {}^3, memcpy {} MiB; {}", opt.gemm_size,
                         opt.copy_bytes >> 20, timing_text(rep, opt, start));
  out.rounds = rep.rounds;
  out.floor_s = rep.floor_s;
  out.elapsed_s = seconds_since(start);
  return out;
}

}  // namespace braid::plan
