// LoRA adapters on disk in the PEFT layout, and merging them into a base model.
//
// adapter_model.safetensors holds base_model.model.<linear path>.lora_A.weight (r, in) and
// .lora_B.weight (out, r) for each wrapped Linear; adapter_config.json the PEFT keys (r,
// lora_alpha, lora_dropout, target_modules, use_rslora, peft_type LORA, task_type CAUSAL_LM,
// base_model_name_or_path, fan_in_fan_out: true for GPT-2, whose HF linears are Conv1D, bias
// none). A and B need no transposition for GPT-2: PEFT keeps them as (r, in) and (out, r)
// and transposes only the product for Conv1D.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "core/models/lora_config.h"
#include "core/models/transformer.h"
#include "launch/io/hf_format.h"

namespace braid {

// "base_model.model." + the braid (HF) name.
std::string peft_tensor_name(const std::string& braid_name);

// Writes the adapters of a LoRA-wrapped `model` into `dir` (replaced whole, never half
// written). `base` is recorded as base_model_name_or_path.
void save_peft_adapter(const Transformer& model, const LoraConfig& cfg, const std::string& base,
                       const std::filesystem::path& dir);

struct PeftAdapter {
  nlohmann::json config;  // adapter_config.json
  NamedTensors tensors;   // braid names (the PEFT prefix removed), f32
  float scale = 0;        // lora_alpha / r, or / sqrt(r) with use_rslora
};

// Reads and checks dir/adapter_config.json and dir/adapter_model.safetensors (UserError
// naming the file and key when something is missing or not LoRA).
PeftAdapter load_peft_adapter(const std::filesystem::path& dir);

// W += scale * B A for every adapter pair, in place on `model` (a plain, unwrapped model, on
// the host or a device).
// Throws UserError when an adapter names a Linear the model lacks or shapes disagree.
void merge_peft_adapter(Transformer& model, const PeftAdapter& adapter);

}  // namespace braid
