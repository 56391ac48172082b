// Machine measurements for the device profile (the planner's only kernel calls).
#include "launch/calibrate/calibrate.h"

#include <fmt/format.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "core/kernels/gemm.h"
#include "launch/calibrate/probes.h"

namespace braid::plan {

using namespace probes;

CalibrationRun calibrate_machine(const CalibrateOptions& opt) {
  const auto start = Clock::now();
  Probes probes;
  const int64_t n = opt.gemm_size;
  auto sq = std::make_shared<std::vector<float>>(3 * n * n, 0.25f);  // A, B, C of (n, n)
  auto sqb = std::make_shared<std::vector<bf16>>(2 * n * n, float_to_bf16(0.25f));
  const double sq_flops = 2.0 * n * n * n;
  const size_t p_f32 = probes.add(
      [sq, n, c = &probes.ctx()] {
        float* p = sq->data();
        gemm_f32(*c, false, false, n, n, n, 1.0f, p, n, p + n * n, n, 0.0f, p + 2 * n * n, n);
      },
      sq_flops);
  const size_t p_bf16 = probes.add(
      [sq, sqb, n, c = &probes.ctx()] {
        const bf16* p = sqb->data();
        gemm_bf16(*c, false, false, n, n, n, 1.0f, p, n, p + n * n, n, 0.0f, sq->data() + 2 * n * n,
                  n);
      },
      sq_flops);
  const size_t p_copy = add_copy_probe(probes, opt.copy_bytes);

  const int64_t N = opt.tokens;
  std::vector<size_t> p_attn, p_attn_gqa, p_attn_seq, p_lm, p_lm_vocab;
  std::vector<BlockProbe> p_block, p_block_llama, p_block_tokens;
  for (int w : opt.gemm_widths) {
    p_block.push_back(add_block_probe(probes, N, w, false));
    p_block_llama.push_back(add_block_probe(probes, N, w, true));
  }
  for (int t : opt.gemm_token_counts)
    p_block_tokens.push_back(add_block_probe(probes, t, opt.gemm_tokens_width, false));
  for (int d : opt.head_dims) {
    p_attn.push_back(add_attention_probe(probes, N, opt.attention_seq, d, 1, opt.attention_width));
    p_attn_gqa.push_back(
        add_attention_probe(probes, N, opt.attention_seq, d, 4, opt.attention_width));
  }
  for (int s : opt.attention_seqs)
    p_attn_seq.push_back(
        add_attention_probe(probes, N, s, opt.attention_sides_head_dim, 1, opt.attention_width));
  std::vector<size_t> p_attn_width;
  for (int w : opt.attention_widths)
    p_attn_width.push_back(
        add_attention_probe(probes, N, opt.attention_seq, opt.attention_sides_head_dim, 1, w));
  for (int w : opt.lm_head_widths)
    p_lm.push_back(add_lm_head_probe(probes, N, w, opt.lm_head_ref_vocab));
  for (int v : opt.lm_head_vocabs)
    p_lm_vocab.push_back(add_lm_head_probe(probes, N, opt.lm_head_vocabs_width, v));
  const size_t p_elem = add_elementwise_probe(probes, N);
  const size_t p_gelu = add_activation_probe(probes, N, false);
  const size_t p_swiglu = add_activation_probe(probes, N, true);
  const size_t p_call = add_call_probe(probes);
  std::vector<size_t> p_opt;
  for (int64_t n : opt.optimizer_params) p_opt.push_back(add_optimizer_probe(probes, n));

  const Probes::RunReport rep = probes.run(opt.rounds, opt.total_seconds, start);

  CalibrationRun out;
  GpuSpec& g = out.profile.gpu;
  CpuProfile& k = out.profile.cpu;
  g.name = "cpu-calibrated";
  g.description = "this machine, measured by braid plan --calibrate (" +
                  gemm_backend_name(probes.ctx().gemm()) + ")";
  const double pages = static_cast<double>(sysconf(_SC_PHYS_PAGES));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  g.memory_gib = pages * page / (1024.0 * 1024.0 * 1024.0);
  g.tflops_fp32 = probes.rate(p_f32) / 1e12;
  g.tflops_bf16 = probes.rate(p_bf16) / 1e12;
  g.tflops_fp16 = 0;
  const double bw_gbs = probes.rate(p_copy) / 1e9;
  g.mem_bw_gbs = bw_gbs;
  g.intra_bw_gbs = bw_gbs / 2;  // one copy moves data in one direction
  g.inter_bw_gbs = bw_gbs / 2;
  g.matmul_efficiency = 1.0;
  g.overhead_gib = 0.25;
  g.gpus_per_node = 1;
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
  k.gemm_by_width = block_table(opt.gemm_widths, p_block, true);
  k.gemm_llama_by_width = block_table(opt.gemm_widths, p_block_llama, true);
  k.block_elementwise_by_width = block_table(opt.gemm_widths, p_block, false);
  k.block_elementwise_llama_by_width = block_table(opt.gemm_widths, p_block_llama, false);
  k.gemm_by_tokens = block_table(opt.gemm_token_counts, p_block_tokens, true);
  k.gemm_ref_tokens = static_cast<double>(N);
  k.attention_by_head_dim = table(opt.head_dims, p_attn);
  k.attention_gqa_by_head_dim = table(opt.head_dims, p_attn_gqa);
  k.attention_by_seq = table(opt.attention_seqs, p_attn_seq);
  k.attention_ref_seq = opt.attention_seq;
  k.attention_by_width = table(opt.attention_widths, p_attn_width);
  k.attention_ref_width = opt.attention_width;
  k.lm_head_by_width = table(opt.lm_head_widths, p_lm);
  k.lm_head_by_vocab = table(opt.lm_head_vocabs, p_lm_vocab);
  k.lm_head_ref_vocab = opt.lm_head_ref_vocab;
  for (size_t i = 0; i < p_opt.size(); ++i)
    k.optimizer_by_params.push_back({double(opt.optimizer_params[i]), probes.rate(p_opt[i]) / 1e9});
  k.threads = omp_get_max_threads();  // the rates are per process at this many threads
  k.elementwise_gbs = probes.rate(p_elem) / 1e9;
  k.gelu_gelems = probes.rate(p_gelu) / 1e9;
  k.swiglu_gelems = probes.rate(p_swiglu) / 1e9;
  // One call's fixed cost: its time less the bytes it moves (r a, r b, w a) at the element-wise
  // rate.
  const double call_s = probes.seconds_per_call(p_call) / 100.0;
  k.kernel_call_us =
      std::max(0.0, call_s - 12.0 * kCallProbeFloats / (k.elementwise_gbs * 1e9)) * 1e6;
  g.source = fmt::format(
      "measured: gemm {}^3, memcpy {} MiB; kernels at {} tokens; {} interleaved rounds, {:.1f} s "
      "in all",
      n, opt.copy_bytes >> 20, N, rep.rounds, seconds_since(start));
  out.rounds = rep.rounds;
  out.floor_s = rep.floor_s;
  out.elapsed_s = seconds_since(start);
  return out;
}

}  // namespace braid::plan
