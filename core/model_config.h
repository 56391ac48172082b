// ModelConfig: the shape of a GPT-2- or Llama-family transformer. Knows nothing of parallelism.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/config_fields.h"
#include "core/rope_scaling.h"

namespace braid {

struct ModelConfig {
  std::string family = "gpt2";
  int vocab_size = 50257;
  int context_length = 1024;
  int n_layer = 12;
  int n_embd = 768;
  int n_head = 12;
  int n_kv_head = 0;   // 0: same as n_head
  int ffn_hidden = 0;  // 0: 4*n_embd for gpt2, SwiGLU rule (8/3 n_embd rounded to 64) for llama
  float norm_eps = 1e-5f;
  float rope_theta = 10000.0f;
  RopeType rope_type = RopeType::Default;
  float rope_factor = 1.0f;
  float rope_low_freq_factor = 1.0f;
  float rope_high_freq_factor = 4.0f;
  int rope_original_context = 0;
  float rope_beta_fast = 32.0f;
  float rope_beta_slow = 1.0f;
  float rope_attention_factor = 0.0f;
  float rope_mscale = 0.0f;
  float rope_mscale_all_dim = 0.0f;
  bool rope_truncate = true;
  bool qkv_bias = false;
  int sliding_window = 0;
  std::optional<bool> tie_embeddings;  // empty (auto): the family default
  float init_std = 0.02f;
  uint64_t seed = 1234;  // parameter initialisation seed

  template <class V>
  void visit(V& v) {
    v("family", family,
      "Model family: gpt2 (LayerNorm, GELU, learned positions, tied embeddings) or llama (RMSNorm, "
      "SwiGLU, RoPE, grouped-query attention; with qkv_bias Qwen2, with sliding_window Mistral).");
    v("vocab_size", vocab_size, "Vocabulary size; must cover every token id in the data.");
    v("context_length", context_length,
      "Longest sequence the model accepts (learned position table size for gpt2).");
    v("n_layer", n_layer, "Number of transformer blocks.");
    v("n_embd", n_embd, "Hidden width (d_model); a multiple of n_head.");
    v("n_head", n_head, "Attention (query) heads.");
    v("n_kv_head", n_kv_head,
      "Key/value heads for grouped-query attention (llama); 0 means n_head. Must divide n_head.");
    v("ffn_hidden", ffn_hidden,
      "MLP hidden width; 0 picks the family default (gpt2: 4*n_embd; llama: 8/3*n_embd rounded up "
      "to 64).");
    v("norm_eps", norm_eps, "Epsilon of LayerNorm/RMSNorm.");
    v("rope_theta", rope_theta, "RoPE base frequency (llama).");
    v("rope_type", rope_type,
      "RoPE frequency scaling, as Hugging Face's rope_type (llama): default (theta^(-2i/d)), "
      "linear (every frequency divided by rope_factor), llama3 (Llama 3.1's: long wavelengths "
      "divided by rope_factor, short ones kept, the band between blended), yarn (YaRN: the same "
      "blend by rotation counts, and cos/sin scaled by an attention factor).");
    v("rope_factor", rope_factor,
      "linear, llama3, yarn: the context extension factor (frequencies are divided by it).");
    v("rope_low_freq_factor", rope_low_freq_factor,
      "llama3: wavelengths above rope_original_context / this are divided by rope_factor.");
    v("rope_high_freq_factor", rope_high_freq_factor,
      "llama3: wavelengths below rope_original_context / this are kept; must exceed "
      "rope_low_freq_factor.");
    v("rope_original_context", rope_original_context,
      "llama3, yarn: the context length the model was pretrained with (HF "
      "original_max_position_embeddings); 0 means context_length.");
    v("rope_beta_fast", rope_beta_fast,
      "yarn: dimensions turning more than this many times over the original context keep their "
      "frequency.");
    v("rope_beta_slow", rope_beta_slow,
      "yarn: dimensions turning fewer than this many times are divided by rope_factor; those "
      "between are blended.");
    v("rope_attention_factor", rope_attention_factor,
      "yarn: cos and sin are multiplied by this; 0 computes it from rope_factor as transformers "
      "does (0.1 ln(factor) + 1, or the ratio of the rope_mscale and rope_mscale_all_dim terms "
      "when both are set).");
    v("rope_mscale", rope_mscale, "yarn: the mscale of DeepSeek-style configs (0: unset).");
    v("rope_mscale_all_dim", rope_mscale_all_dim,
      "yarn: the mscale_all_dim of DeepSeek-style configs (0: unset).");
    v("rope_truncate", rope_truncate,
      "yarn: round the blended band's bounds to whole dimensions (HF truncate).");
    v("qkv_bias", qkv_bias, "llama: biases on the q, k and v projections (Qwen2).");
    v("sliding_window", sliding_window,
      "llama: each position attends to itself and the sliding_window - 1 positions before it "
      "(Mistral); 0: all earlier positions.");
    v("tie_embeddings", tie_embeddings,
      "auto: the family default (gpt2 ties the LM head to the token embedding, llama does not); "
      "true: tied; false: untied (a separate LM head). -1, 0 and 1 are read as auto, false and "
      "true.");
    v("init_std", init_std,
      "Std of the normal init; residual output projections use init_std/sqrt(2*n_layer).");
    v("seed", seed, "Seed of the parameter initialisation.");
  }
  void validate() const;

  bool is_llama() const { return family == "llama"; }
  int kv_heads() const { return n_kv_head > 0 ? n_kv_head : n_head; }
  int head_dim() const { return n_embd / n_head; }
  int ffn() const;
  bool tied() const { return tie_embeddings.value_or(!is_llama()); }
  // The RoPE parameters the kernels take (original_context resolved to context_length).
  RopeScaling rope() const;
  // Parameter count (each tensor counted once; tied head not double counted).
  int64_t num_params() const;
  // Parameters that take part in matmuls per token (LM head included, position table not).
  int64_t num_matmul_params() const;
  // The same of one block.
  int64_t block_matmul_params() const;
  // Model FLOPs per token for forward+backward at sequence length T:
  // 6 * matmul params + 12 * n_layer * n_embd * T (attention scores and values, PaLM appendix B).
  double flops_per_token(int T) const;
  // Its parts (what the trainer balances its pipeline stages by): one block,
  // 6 * block_matmul_params + 12 * n_embd * T, and the LM head, 6 * vocab_size * n_embd.
  double block_flops_per_token(int T) const;
  double head_flops_per_token() const;
};

}  // namespace braid
