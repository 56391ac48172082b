// The RoPE frequency of each pair and the cos/sin scale for a RopeScaling: picks the per-type
// formulas of core/kernels/math/rope_freq.h (shared by both backends).
#pragma once

#include <cstdint>

#include "core/kernels/math/rope_freq.h"
#include "core/rope_scaling.h"

namespace braid {

// The factor cos and sin are multiplied by: 1 but for yarn, whose attention_factor is given
// or follows from factor (with DeepSeek's mscale ratio when mscale and mscale_all_dim are set).
inline double rope_attention_scaling(const RopeScaling& r) {
  if (r.type != RopeType::Yarn) return 1.0;
  if (r.attention_factor > 0.0) return r.attention_factor;
  if (r.mscale != 0.0 && r.mscale_all_dim != 0.0)
    return math::yarn_mscale(r.factor, r.mscale) / math::yarn_mscale(r.factor, r.mscale_all_dim);
  return math::yarn_mscale(r.factor, 1.0);
}

// The frequency of pair i (0 <= i < D/2) of a head of size D. llama3 and yarn read
// original_context, which must then be set (> 0).
inline double rope_inv_freq(const RopeScaling& r, int64_t i, int64_t D) {
  const double base = math::rope_freq(i, D, r.theta);
  const double original = static_cast<double>(r.original_context);
  switch (r.type) {
    case RopeType::Default:
      return base;
    case RopeType::Linear:
      return base / r.factor;
    case RopeType::Llama3:
      return math::rope_llama3_inv_freq(base, r.factor, r.low_freq_factor, r.high_freq_factor,
                                        original);
    case RopeType::Yarn: {
      double low = 0, high = 0;
      math::yarn_correction_range(r.beta_fast, r.beta_slow, D, r.theta, original, r.truncate, &low,
                                  &high);
      return math::rope_yarn_inv_freq(base, r.factor, i, low, high);
    }
  }
  return base;
}

}  // namespace braid
