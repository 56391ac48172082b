// ModelConfig validation and size arithmetic.
#include "core/model_config.h"

#include <cmath>

namespace braid {

void ModelConfig::validate() const {
  if (family != "gpt2" && family != "llama")
    config_error("family", "family is '{}'; expected gpt2 or llama", family);
  if (vocab_size < 2) config_error("vocab_size", "vocab_size is {}; expected >= 2", vocab_size);
  if (context_length < 1)
    config_error("context_length", "context_length is {}; expected >= 1", context_length);
  if (n_layer < 1) config_error("n_layer", "n_layer is {}; expected >= 1", n_layer);
  if (n_head < 1) config_error("n_head", "n_head is {}; expected >= 1", n_head);
  if (n_embd < 1 || n_embd % n_head != 0)
    config_error("n_embd", "n_embd is {}; expected a positive multiple of n_head ({})", n_embd,
                 n_head);
  if (n_kv_head < 0 || (n_kv_head > 0 && n_head % n_kv_head != 0))
    config_error("n_kv_head", "n_kv_head is {}; expected 0 or a divisor of n_head ({})", n_kv_head,
                 n_head);
  if (!is_llama() && n_kv_head != 0 && n_kv_head != n_head)
    config_error("n_kv_head", "n_kv_head is {}; gpt2 has no grouped-query attention (use 0)",
                 n_kv_head);
  if (is_llama() && head_dim() % 2 != 0)
    config_error("n_embd", "head dim n_embd/n_head = {} must be even for RoPE", head_dim());
  if (ffn_hidden < 0) config_error("ffn_hidden", "ffn_hidden is {}; expected >= 0", ffn_hidden);
  if (!(norm_eps > 0.0f)) config_error("norm_eps", "norm_eps is {}; expected > 0", norm_eps);
  if (!(rope_theta > 0.0f))
    config_error("rope_theta", "rope_theta is {}; expected > 0", rope_theta);
  if (!is_llama() && rope_type != RopeType::Default)
    config_error("rope_type", "rope_type is {}; gpt2 has no RoPE (use default)",
                 enum_name(rope_type));
  if (!(rope_factor > 0.0f) || !std::isfinite(rope_factor))
    config_error("rope_factor", "rope_factor is {}; expected > 0", rope_factor);
  if (rope_original_context < 0)
    config_error("rope_original_context",
                 "rope_original_context is {}; expected >= 0 (0: context_length)",
                 rope_original_context);
  if (rope_type == RopeType::Llama3 &&
      !(rope_low_freq_factor > 0.0f && rope_high_freq_factor > rope_low_freq_factor))
    config_error(
        "rope_high_freq_factor",
        "rope_low_freq_factor {} and rope_high_freq_factor {}: llama3 needs 0 < low < high",
        rope_low_freq_factor, rope_high_freq_factor);
  if (rope_type == RopeType::Yarn && !(rope_beta_fast > 0.0f && rope_beta_slow > 0.0f))
    config_error("rope_beta_fast", "rope_beta_fast {} and rope_beta_slow {}: yarn needs both > 0",
                 rope_beta_fast, rope_beta_slow);
  if (rope_attention_factor < 0.0f || !std::isfinite(rope_attention_factor))
    config_error("rope_attention_factor",
                 "rope_attention_factor is {}; expected >= 0 (0: from rope_factor)",
                 rope_attention_factor);
  if (!is_llama() && qkv_bias)
    config_error("qkv_bias", "qkv_bias is true; gpt2's projections always have biases (use false)");
  if (sliding_window < 0)
    config_error("sliding_window", "sliding_window is {}; expected >= 0 (0: no window)",
                 sliding_window);
  if (!is_llama() && sliding_window != 0)
    config_error("sliding_window",
                 "sliding_window is {}; gpt2 attends to every earlier position (use 0)",
                 sliding_window);
  if (!(init_std > 0.0f)) config_error("init_std", "init_std is {}; expected > 0", init_std);
}

RopeScaling ModelConfig::rope() const {
  RopeScaling r;
  r.type = rope_type;
  r.theta = rope_theta;
  r.factor = rope_factor;
  r.low_freq_factor = rope_low_freq_factor;
  r.high_freq_factor = rope_high_freq_factor;
  r.original_context = rope_original_context > 0 ? rope_original_context : context_length;
  r.beta_fast = rope_beta_fast;
  r.beta_slow = rope_beta_slow;
  r.attention_factor = rope_attention_factor;
  r.mscale = rope_mscale;
  r.mscale_all_dim = rope_mscale_all_dim;
  r.truncate = rope_truncate;
  return r;
}

int ModelConfig::ffn() const {
  if (ffn_hidden > 0) return ffn_hidden;
  if (!is_llama()) return 4 * n_embd;
  const int h = (8 * n_embd + 2) / 3;
  return (h + 63) / 64 * 64;
}

int64_t ModelConfig::num_params() const {
  const int64_t C = n_embd, V = vocab_size, F = ffn(), L = n_layer;
  const int64_t kv = static_cast<int64_t>(kv_heads()) * head_dim();
  int64_t p = V * C;        // token embedding
  if (!tied()) p += V * C;  // separate LM head
  if (is_llama()) {
    const int64_t block = C * C + 2 * C * kv + C * C      // q, k, v, o
                          + 3 * C * F                     // gate, up, down
                          + 2 * C                         // two RMSNorm weights
                          + (qkv_bias ? C + 2 * kv : 0);  // q, k, v biases
    p += L * block + C;                                   // final norm
  } else {
    p += static_cast<int64_t>(context_length) * C;  // position embedding
    const int64_t block = C * 3 * C + 3 * C         // c_attn
                          + C * C + C               // attn c_proj
                          + C * F + F + F * C + C   // mlp c_fc, c_proj
                          + 4 * C;                  // two LayerNorms
    p += L * block + 2 * C;                         // ln_f
  }
  return p;
}

int64_t ModelConfig::block_matmul_params() const {
  const int64_t C = n_embd, F = ffn();
  const int64_t kv = static_cast<int64_t>(kv_heads()) * head_dim();
  return is_llama() ? (2 * C * C + 2 * C * kv + 3 * C * F) : (4 * C * C + 2 * C * F);
}

int64_t ModelConfig::num_matmul_params() const {
  const int64_t C = n_embd, V = vocab_size, L = n_layer;
  return L * block_matmul_params() + V * C;  // LM head
}

double ModelConfig::flops_per_token(int T) const {
  return 6.0 * static_cast<double>(num_matmul_params()) +
         12.0 * n_layer * static_cast<double>(n_embd) * T;
}

double ModelConfig::block_flops_per_token(int T) const {
  return 6.0 * static_cast<double>(block_matmul_params()) + 12.0 * n_embd * static_cast<double>(T);
}

double ModelConfig::head_flops_per_token() const {
  return 6.0 * (static_cast<double>(vocab_size) * n_embd);
}

}  // namespace braid
