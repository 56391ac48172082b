// RoPE settings in HF config.json: `rope_parameters` (transformers 5) and `rope_scaling` (the
// older layout, which transformers 5 still reads first) <-> ModelConfig's rope_* keys.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "core/model_config.h"

namespace braid {

// Reads rope_theta, rope_parameters and rope_scaling of `hf` into c's rope_* fields (rope
// types default, linear, llama3 and yarn). Another rope type, a field the type does not take,
// a partial_rotary_factor other than 1, or the two sections disagreeing throw UserError naming
// `path` and the field. Needs c.context_length set (yarn's factor may be derived from it).
void rope_from_hf(const nlohmann::json& hf, ModelConfig& c, const std::string& path);

// Writes rope_theta, rope_parameters and rope_scaling (null for the default type) into `hf`,
// so both transformers 5 and earlier versions read the same frequencies.
void rope_to_hf(const ModelConfig& c, nlohmann::json& hf);

}  // namespace braid
