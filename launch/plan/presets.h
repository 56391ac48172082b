// Named model shapes (GPT-2, Llama, Qwen, GPT-3).
#pragma once

#include <string>
#include <vector>

#include "core/model_config.h"

namespace braid::plan {

struct ModelPreset {
  std::string name;
  std::string description;
  ModelConfig model;  // context_length doubles as the default training sequence length
};

const std::vector<ModelPreset>& model_presets();

// A preset by name; throws UserError listing the valid names.
ModelConfig find_preset(const std::string& name);

}  // namespace braid::plan
