// RopeScaling: the rotary position embedding's frequencies as Hugging Face configs describe
// them (rope_type default, linear, llama3, yarn), plain data shared by the model config and
// the kernels (core/kernels/rope_freq.h holds the math).
#pragma once

#include <array>

#include "core/config_fields.h"

namespace braid {

enum class RopeType { Default, Linear, Llama3, Yarn };
constexpr std::array<EnumName<RopeType>, 4> config_enum_names(RopeType) {
  return {{{RopeType::Default, "default"},
           {RopeType::Linear, "linear"},
           {RopeType::Llama3, "llama3"},
           {RopeType::Yarn, "yarn"}}};
}

// The parameters of one rope type; fields a type does not use are ignored by it.
struct RopeScaling {
  RopeType type = RopeType::Default;
  double theta = 10000.0;  // base frequency
  double factor = 1.0;     // linear, llama3, yarn: how much longer the context is made
  // llama3: wavelengths above original_context / low_freq_factor are divided by factor, those
  // below original_context / high_freq_factor kept, the band between blended.
  double low_freq_factor = 1.0, high_freq_factor = 4.0;
  // llama3, yarn: the context length the model was pretrained with.
  int64_t original_context = 0;
  // yarn: the rotation counts that bound the blend between interpolated and kept frequencies.
  double beta_fast = 32.0, beta_slow = 1.0;
  // yarn: cos and sin are multiplied by this; 0 means "from factor" (mscale rule below).
  double attention_factor = 0.0;
  double mscale = 0.0, mscale_all_dim = 0.0;  // yarn: 0 means unset
  bool truncate = true;                       // yarn: round the blend's bounds to whole dimensions
};

}  // namespace braid
