// The text `braid plan --calibrate` prints (see calibrate_report.h).
#include "launch/plan/calibrate_report.h"

#include <fmt/format.h>

namespace braid::plan {

std::string calibration_text(const CalibrationRun& run, const CalibrateOptions& opt,
                             const std::string& out_path) {
  const GpuSpec& g = run.profile.gpu;
  const CpuProfile& k = run.profile.cpu;
  // A GPU's FLOP rates in TFLOP/s, a CPU's in GFLOP/s.
  const bool gpu = run.profile.device == "cuda";
  const double scale = gpu ? 1.0 : 1e3;
  const char* unit = gpu ? "TFLOP/s" : "GFLOP/s";
  std::string o = gpu ? fmt::format("device: {}\n", g.description) : std::string();
  o += fmt::format("measured: f32 GEMM {:.1f} {}, bf16 GEMM {:.1f} {} ({}^3), copy {:.1f} GB/s\n",
                   g.tflops_fp32 * scale, unit, g.tflops_bf16 * scale, unit, opt.gemm_size,
                   g.mem_bw_gbs);
  auto rates = [&](const std::string& what, const char* key, const std::vector<RatePoint>& v) {
    o += fmt::format("  {:<40}", what);
    for (const RatePoint& p : v) o += fmt::format(" {} {}: {:.1f}", key, p.key, p.rate * scale);
    o += fmt::format("  {}\n", unit);
  };
  rates("GEMMs in a GPT-2 block (fwd + bwd)", "n_embd", k.gemm_by_width);
  rates("GEMMs in a Llama block (fwd + bwd)", "n_embd", k.gemm_llama_by_width);
  rates(fmt::format("same, GPT-2 n_embd {}", opt.gemm_tokens_width), "tokens", k.gemm_by_tokens);
  rates(fmt::format("causal attention fwd+bwd, T {}, n_embd {}", opt.attention_seq,
                    opt.attention_width),
        "head_dim", k.attention_by_head_dim);
  rates("same, 4 query heads per KV head", "head_dim", k.attention_gqa_by_head_dim);
  rates(fmt::format("same, head_dim {}", opt.attention_sides_head_dim), "T", k.attention_by_seq);
  rates(fmt::format("same, head_dim {}, T {}", opt.attention_sides_head_dim, opt.attention_seq),
        "n_embd", k.attention_by_width);
  rates(fmt::format("LM head + cross-entropy fwd+bwd, V {}", opt.lm_head_ref_vocab), "n_embd",
        k.lm_head_by_width);
  rates(fmt::format("same, n_embd {}", opt.lm_head_vocabs_width), "V", k.lm_head_by_vocab);
  auto gbs = [&](const char* what, const std::vector<RatePoint>& v) {
    o += fmt::format("  {:<40}", what);
    for (const RatePoint& p : v) o += fmt::format(" n_embd {}: {:.1f}", p.key, p.rate);
    o += "  GB/s\n";
  };
  gbs("element-wise kernels in a GPT-2 block", k.block_elementwise_by_width);
  gbs("element-wise kernels in a Llama block", k.block_elementwise_llama_by_width);
  o += fmt::format("  {:<40}", "optimizer passes (norm, clip, AdamW)");
  for (const RatePoint& p : k.optimizer_by_params)
    o += fmt::format(" {:.3g}M params: {:.1f}", p.key / 1e6, p.rate);
  o += "  GB/s\n";
  o += fmt::format("  {:<40} {:.1f} GB/s\n", "norms and adds (memory-bound)", k.elementwise_gbs);
  o += fmt::format("  {:<40} GELU {:.2f}, SwiGLU {:.2f}  G elements/s\n", "activations fwd+bwd",
                   k.gelu_gelems, k.swiglu_gelems);
  o += fmt::format("  {:<40} {:.1f} us\n",
                   gpu ? "fixed cost per kernel call (launch)" : "fixed cost per parallel kernel call",
                   k.kernel_call_us);
  o += fmt::format("took {:.1f} s ({} rounds; budget --calibrate-seconds {:g})\n", run.elapsed_s,
                   run.rounds, opt.total_seconds);
  if (run.rounds == 0)
    o += fmt::format(
        "note: {:g} s is less than setup and one warm-up call of every probe took ({:.1f} s); the "
        "rates "
        "rest on those single warm-up calls (first-touch effects included). A timed round needs "
        "about "
        "--calibrate-seconds {:.0f}\n",
        opt.total_seconds, run.elapsed_s, run.floor_s + 1);
  o += gpu ? std::string("(links: see the device line; no collective was measured)\n")
           : std::string("(communication bandwidth = copy bandwidth on this one node)\n");
  o += fmt::format("wrote {}\n", out_path);
  return o;
}

}  // namespace braid::plan
