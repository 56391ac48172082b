// LoraConfig: the `lora` section (low-rank adapters on a frozen base model).
#pragma once

#include <array>
#include <string>
#include <vector>

#include "core/config_fields.h"

namespace braid {

// How the frozen base weights of the targeted linears are stored (QLoRA: nf4).
enum class BaseQuant { None, Int8, Nf4 };
constexpr std::array<EnumName<BaseQuant>, 3> config_enum_names(BaseQuant) {
  return {{{BaseQuant::None, "none"}, {BaseQuant::Int8, "int8"}, {BaseQuant::Nf4, "nf4"}}};
}

struct LoraConfig {
  int rank = 0;
  float alpha = 16.0f;
  float dropout = 0.0f;
  std::vector<std::string> targets = {};
  bool rslora = false;
  std::string init_from = "";
  BaseQuant base_quant = BaseQuant::None;
  int quant_block_size = 64;
  bool double_quant = true;

  bool enabled() const { return rank > 0; }

  template <class V>
  void visit(V& v) {
    v("rank", rank, "Adapter rank r; 0 disables LoRA (the whole model trains).");
    v("alpha", alpha,
      "Scale numerator: the adapter adds (alpha / r) * B A x, or (alpha / sqrt(r)) * B A x with "
      "rslora.");
    v("dropout", dropout,
      "Dropout on the adapter's input during training (0 <= p < 1); masks are counter-based, so "
      "resumed and recomputed steps draw the same ones.");
    v("targets", targets,
      "Linears that get adapters, by module name: q_proj, k_proj, v_proj, o_proj, gate_proj, "
      "up_proj, down_proj (llama; also q, k, v, o, gate, up, down), c_attn, c_proj, c_fc "
      "(gpt2; c_proj means both attn.c_proj and mlp.c_proj), or all-linear (every Linear of "
      "the blocks, as PEFT), as a list or one name. Empty: llama all-linear, gpt2 c_attn.");
    v("rslora", rslora, "Rank-stabilised scaling alpha / sqrt(r) instead of alpha / r.");
    v("init_from", init_from,
      "Base model to start from: an HF directory (config.json + model.safetensors), a braid "
      "checkpoint or a run directory. Its shape replaces the model section. Empty: the model "
      "section's seeded init. Relative paths are relative to the config file.");
    v("base_quant", base_quant,
      "How the targeted linears' frozen base weights are stored: none (the training precision), "
      "int8 (absmax, 8 bits) or nf4 (QLoRA's 4-bit NormalFloat). Only the quantised weight is "
      "kept; tiles are dequantised into the GEMM. Under tensor parallelism each rank quantises its "
      "part of a split matrix.");
    v("quant_block_size", quant_block_size,
      "Values per absmax block of the quantised base (bitsandbytes: 64).");
    v("double_quant", double_quant,
      "Quantise the base's absmax values again (8-bit dynamic, blocks of 256, as QLoRA): "
      "~0.127 instead of 0.5 bits per weight for the constants.");
  }
  void validate() const {
    if (rank < 0) config_error("rank", "rank is {}; expected >= 0 (0: LoRA off)", rank);
    if (!(alpha > 0.0f)) config_error("alpha", "alpha is {}; expected > 0", alpha);
    if (!(dropout >= 0.0f && dropout < 1.0f))
      config_error("dropout", "dropout is {}; expected 0 <= dropout < 1", dropout);
    if (quant_block_size < 2 || quant_block_size % 2 != 0 || quant_block_size > 4096)
      config_error("quant_block_size",
                   "quant_block_size is {}; expected an even number from 2 to 4096 (e.g. 64)",
                   quant_block_size);
    for (const std::string& t : targets)
      if (!is_lora_target_name(t))
        config_error("targets",
                     "target '{}' is not a module name; expected q_proj, k_proj, v_proj, "
                     "o_proj, gate_proj, up_proj, down_proj (or q, k, v, o, gate, up, down) for "
                     "llama, c_attn, c_proj, c_fc for gpt2, or all-linear",
                     t);
  }

  // Whether name is one targets accepts.
  static bool is_lora_target_name(const std::string& name) {
    static const char* known[] = {"q",      "k",       "v",         "o",       "up",
                                  "down",   "gate",    "q_proj",    "k_proj",  "v_proj",
                                  "o_proj", "up_proj", "down_proj", "gate_proj", "c_attn",
                                  "c_proj", "c_fc",    "all-linear"};
    for (const char* k : known)
      if (name == k) return true;
    return false;
  }

  // The targets in effect: as given, or the family's default when none are (llama: every
  // Linear of the blocks, as PEFT's all-linear; gpt2: c_attn, as PEFT's GPT-2 default).
  std::vector<std::string> effective_targets(bool is_llama) const {
    if (!targets.empty()) return targets;
    return {is_llama ? "all-linear" : "c_attn"};
  }
};

}  // namespace braid
