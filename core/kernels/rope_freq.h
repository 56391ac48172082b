// RoPE frequencies and the cos/sin scale of each rope type, as transformers computes them
// (modeling_rope_utils: default, linear, llama3, yarn). Plain functions of the parameters and
// the pair index, so every backend builds the same table.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/rope_scaling.h"

namespace braid {

// theta^(-2i/D): the unscaled frequency of pair i of a head of size D.
inline double rope_base_inv_freq(double theta, int64_t i, int64_t D) {
  return 1.0 / std::pow(theta, static_cast<double>(2 * i) / static_cast<double>(D));
}

// yarn's attention factor: given, or 0.1 ln(factor) + 1 (with DeepSeek's mscale ratio when
// both mscale and mscale_all_dim are set), 1 for factor <= 1.
inline double yarn_mscale(double scale, double m) {
  return scale <= 1.0 ? 1.0 : 0.1 * m * std::log(scale) + 1.0;
}

// The factor cos and sin are multiplied by (1 except for yarn).
inline double rope_attention_scaling(const RopeScaling& r) {
  if (r.type != RopeType::Yarn) return 1.0;
  if (r.attention_factor > 0.0) return r.attention_factor;
  if (r.mscale != 0.0 && r.mscale_all_dim != 0.0)
    return yarn_mscale(r.factor, r.mscale) / yarn_mscale(r.factor, r.mscale_all_dim);
  return yarn_mscale(r.factor, 1.0);
}

// yarn: the dimension (of D) whose wavelength makes `rotations` turns over `context` positions.
inline double yarn_correction_dim(double rotations, int64_t D, double theta, double context) {
  const double pi = 3.14159265358979323846;
  return static_cast<double>(D) * std::log(context / (rotations * 2.0 * pi)) /
         (2.0 * std::log(theta));
}

// The frequency of pair i (0 <= i < D/2) of a head of size D. llama3 and yarn read
// original_context, which must then be set (> 0).
inline double rope_inv_freq(const RopeScaling& r, int64_t i, int64_t D) {
  const double base = rope_base_inv_freq(r.theta, i, D);
  const double original = static_cast<double>(r.original_context);
  switch (r.type) {
    case RopeType::Default:
      return base;
    case RopeType::Linear:
      return base / r.factor;
    case RopeType::Llama3: {
      const double pi = 3.14159265358979323846;
      const double wavelen = 2.0 * pi / base;
      const double low_wavelen = original / r.low_freq_factor;
      const double high_wavelen = original / r.high_freq_factor;
      if (wavelen < high_wavelen) return base;
      if (wavelen > low_wavelen) return base / r.factor;
      const double smooth =
          (original / wavelen - r.low_freq_factor) / (r.high_freq_factor - r.low_freq_factor);
      return (1.0 - smooth) * base / r.factor + smooth * base;
    }
    case RopeType::Yarn: {
      double low = yarn_correction_dim(r.beta_fast, D, r.theta, original);
      double high = yarn_correction_dim(r.beta_slow, D, r.theta, original);
      if (r.truncate) {
        low = std::floor(low);
        high = std::ceil(high);
      }
      low = std::max(low, 0.0);
      high = std::min(high, static_cast<double>(D - 1));
      if (low == high) high += 0.001;  // as transformers: no zero-width ramp
      const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
      const double keep = 1.0 - ramp;  // share of the unscaled (extrapolated) frequency
      return base / r.factor * (1.0 - keep) + base * keep;
    }
  }
  return base;
}

}  // namespace braid
