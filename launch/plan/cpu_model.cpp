// CPU step time from calibrated kernel rates (docs/plan.md, "CPU runs").
#include "launch/plan/cpu_model.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "launch/plan/model_math.h"

namespace braid::plan {

namespace {
constexpr double kF32 = 4.0;
}  // namespace

bool has_kernel_rates(const CpuProfile& g) {
  return !g.gemm_by_width.empty() && !g.attention_by_head_dim.empty() &&
         !g.lm_head_by_width.empty() && g.elementwise_gbs > 0 && g.gelu_gelems > 0 &&
         g.swiglu_gelems > 0;
}

double rate_at(const std::vector<RatePoint>& table, double key) {
  BRAID_CHECK(!table.empty(), "rate_at on an empty rate table");
  BRAID_CHECK(key > 0, "rate_at key {}", key);
  std::vector<RatePoint> pts = table;
  std::sort(pts.begin(), pts.end(),
            [](const RatePoint& a, const RatePoint& b) { return a.key < b.key; });
  if (key <= pts.front().key) return pts.front().rate;
  if (key >= pts.back().key) return pts.back().rate;
  for (size_t i = 1; i < pts.size(); ++i) {
    if (key > pts[i].key) continue;
    const double x0 = std::log(pts[i - 1].key), x1 = std::log(pts[i].key);
    const double f = x1 > x0 ? (std::log(key) - x0) / (x1 - x0) : 1.0;
    return pts[i - 1].rate + f * (pts[i].rate - pts[i - 1].rate);
  }
  return pts.back().rate;
}

double side_factor(const std::vector<RatePoint>& table, double key, double ref) {
  if (table.empty() || !(ref > 0)) return 1.0;
  return rate_at(table, key) / rate_at(table, ref);
}

double attention_kernel_flops_per_token(const ModelConfig& m, int64_t s) {
  return 7.0 * m.n_embd * static_cast<double>(s);
}

double block_elementwise_bytes_per_token(const ModelConfig& m) {
  const double C = m.n_embd, F = m.ffn();
  const double kv = static_cast<double>(m.kv_heads()) * m.head_dim();
  double elems = 0;
  if (m.is_llama()) {
    // forward: 2 RMSNorms (r+w 2C each), RoPE on q and k in place (r+w), 2 residual adds
    // (r 2C, w C)
    elems += 2 * 2 * C + 2 * (C + kv) + 2 * 3 * C;
    // backward: 2 RMSNorms (r dy, x; w dx), RoPE on dq, dk, the 2 adds of the q/k/v and
    // gate/up input gradients (3C each), 2 residual adds
    elems += 2 * 3 * C + 2 * (C + kv) + 2 * 3 * C + 2 * 3 * C;
  } else {
    // forward: 2 LayerNorms, 4 bias writes (3C, C, F, C; on oneDNN's AVX-512 plans the GEMMs
    // add the bias in their epilogues, and the block probe's measured rate absorbs that), 2
    // residual adds (attention reads the fused QKV projection in place: no split copy)
    elems += 2 * 2 * C + (5 * C + F) + 2 * 3 * C;
    // backward: 2 LayerNorms, 4 bias-gradient sums, 2 residual adds (no merge copy)
    elems += 2 * 3 * C + (5 * C + F) + 2 * 3 * C;
  }
  return elems * kF32;
}

double block_activation_seconds_per_token(const ModelConfig& m, const CpuProfile& g) {
  const double rate = m.is_llama() ? g.swiglu_gelems : g.gelu_gelems;
  BRAID_CHECK(rate > 0, "no calibrated {} rate in the CPU profile",
              m.is_llama() ? "SwiGLU" : "GELU");
  return static_cast<double>(m.ffn()) / (rate * 1e9);
}

double edge_elementwise_bytes_per_token(const ModelConfig& m) {
  const double C = m.n_embd;
  // embedding: write C (+ read the position row); its backward scatters C (r+w); final norm
  // forward 2C, backward 3C.
  return (C * (m.is_llama() ? 1 : 2) + 2 * C + 5 * C) * kF32;
}

double optimizer_step_bytes(double params, const std::string& optimizer) {
  // adamw8bit: as adamw, but the update moves 4 arrays' worth (w read and written, g read, the
  // two 1-byte moments read and written: one f32 array) instead of 7.
  const double arrays = optimizer == "sgd" ? 6.0 : (optimizer == "adamw8bit" ? 5.0 : 8.0);
  return arrays * kF32 * params;
}

double block_kernel_calls(const ModelConfig& m) { return m.is_llama() ? 42.0 : 35.0; }

double parameter_tensors(const ModelConfig& m) {
  // gpt2: 2 LayerNorms (w, b) and 4 linears (w, b) per block; wte, wpe, ln_f w and b.
  // llama: 2 RMSNorms and 7 linears per block; embedding, final norm, untied head.
  if (m.is_llama()) return 9.0 * m.n_layer + (m.tied() ? 2.0 : 3.0);
  return 12.0 * m.n_layer + 4.0;
}

CpuStepTime cpu_microbatch_time(const ModelConfig& m, const TrainOptions& t, const CpuProfile& g,
                                double layers, bool with_head, int tp) {
  BRAID_CHECK(has_kernel_rates(g), "cpu_microbatch_time needs a calibrated CPU profile");
  const int64_t s = t.seq > 0 ? t.seq : m.context_length;
  const double tokens = static_cast<double>(s) * t.micro_batch;
  // Matmul FLOPs of the block: hardware FLOPs less the attention core (counted separately).
  const double attn_model = 12.0 * m.n_embd * static_cast<double>(s);
  const double attn_recompute =
      t.checkpointing == Checkpointing::None ? 0.0 : 4.0 * m.n_embd * static_cast<double>(s);
  const double matmul = block_hw_flops_per_token(m, t, s) - attn_model - attn_recompute;
  // Recomputing the attention forward repeats the 2·h·s causal forward of the kernel.
  const double attn = attention_kernel_flops_per_token(m, s) *
                      (t.checkpointing == Checkpointing::None ? 1.0 : 9.0 / 7.0);
  const double passes = t.checkpointing == Checkpointing::Full ? 1.5 : 1.0;
  CpuStepTime r;
  // Llama blocks and grouped-query attention have their own tables when the profile has them.
  const std::vector<RatePoint>& gemm_rates =
      m.is_llama() && !g.gemm_llama_by_width.empty() ? g.gemm_llama_by_width : g.gemm_by_width;
  const std::vector<RatePoint>& attn_rates =
      m.kv_heads() < m.n_head && !g.attention_gqa_by_head_dim.empty() ? g.attention_gqa_by_head_dim
                                                                      : g.attention_by_head_dim;
  const double gemm_rate =
      rate_at(gemm_rates, m.n_embd) * side_factor(g.gemm_by_tokens, tokens, g.gemm_ref_tokens);
  const double attn_rate =
      rate_at(attn_rates, m.head_dim()) *
      side_factor(g.attention_by_seq, static_cast<double>(s), g.attention_ref_seq) *
      side_factor(g.attention_by_width, m.n_embd, g.attention_ref_width);
  r.gemm = layers * matmul * tokens / tp / (gemm_rate * 1e12);
  r.attention = layers * attn * tokens / tp / (attn_rate * 1e12);
  // A block's element-wise kernels at the rate measured inside a real block of this family
  // and width when the profile has it; the embedding and final norm at elementwise_gbs.
  const std::vector<RatePoint>& block_ew =
      m.is_llama() ? g.block_elementwise_llama_by_width : g.block_elementwise_by_width;
  const double block_gbs = block_ew.empty() ? g.elementwise_gbs : rate_at(block_ew, m.n_embd);
  r.elementwise =
      layers * passes * block_elementwise_bytes_per_token(m) * tokens / (block_gbs * 1e9);
  if (with_head) {
    const double lm_rate = rate_at(g.lm_head_by_width, m.n_embd) *
                           side_factor(g.lm_head_by_vocab, m.vocab_size, g.lm_head_ref_vocab);
    r.lm_head = head_flops_per_token(m, t) * tokens / tp / (lm_rate * 1e12);
    r.elementwise += edge_elementwise_bytes_per_token(m) * tokens / (g.elementwise_gbs * 1e9);
  }
  // GELU/SwiGLU run on the MLP width, which tensor parallelism splits (column-parallel).
  r.activation = layers * passes * tokens * block_activation_seconds_per_token(m, g) / tp;
  // Embedding and final norm forward + backward, and the fused LM head: about 5 calls. A
  // block's own calls are already inside its measured rates when those come from real blocks.
  const double block_calls = block_ew.empty() ? block_kernel_calls(m) : 0.0;
  const double calls = layers * passes * block_calls + (with_head ? 5.0 : 0.0);
  r.calls = calls * g.kernel_call_us * 1e-6;
  return r;
}

}  // namespace braid::plan
