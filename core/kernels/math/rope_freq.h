// RoPE frequencies of the scaled rope types as transformers computes them (modeling_rope_utils:
// linear, llama3, yarn), per pair, in plain numbers, on top of the unscaled rope_freq of
// core/kernels/math/rope.h: both backends build their cos/sin tables from these
// (core/kernels/rope_freq.h picks them by a RopeScaling).
#pragma once

#include <cmath>
#include <cstdint>

#include "core/kernels/math/hd.h"
#include "core/kernels/math/rope.h"

namespace braid::math {

// llama3: a wavelength above original / low_freq_factor is divided by factor, one below
// original / high_freq_factor kept, and the band between blended by original / wavelength.
BRAID_HD double rope_llama3_inv_freq(double base, double factor, double low_freq_factor,
                                     double high_freq_factor, double original) {
  const double wavelen = 2.0 * 3.14159265358979323846 / base;
  if (wavelen < original / high_freq_factor) return base;
  if (wavelen > original / low_freq_factor) return base / factor;
  const double smooth =
      (original / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
  return (1.0 - smooth) * base / factor + smooth * base;
}

// yarn: the dimension (of D) whose wavelength makes `rotations` turns over `context` positions.
BRAID_HD double yarn_correction_dim(double rotations, int64_t D, double theta, double context) {
  return static_cast<double>(D) * std::log(context / (rotations * 2.0 * 3.14159265358979323846)) /
         (2.0 * std::log(theta));
}

// yarn: the dimensions [low, high] between which frequencies are blended, from beta_fast and
// beta_slow rotations over the original context; rounded outwards when truncate.
BRAID_HD void yarn_correction_range(double beta_fast, double beta_slow, int64_t D, double theta,
                                    double original, bool truncate, double* low, double* high) {
  double lo = yarn_correction_dim(beta_fast, D, theta, original);
  double hi = yarn_correction_dim(beta_slow, D, theta, original);
  if (truncate) {
    lo = std::floor(lo);
    hi = std::ceil(hi);
  }
  lo = std::fmax(lo, 0.0);
  hi = std::fmin(hi, static_cast<double>(D - 1));
  if (lo == hi) hi += 0.001;  // as transformers: no zero-width ramp
  *low = lo;
  *high = hi;
}

// yarn: pair i's frequency, the unscaled one below `low`, base / factor above `high`, a linear
// ramp between.
BRAID_HD double rope_yarn_inv_freq(double base, double factor, int64_t i, double low, double high) {
  const double ramp = std::fmin(std::fmax((static_cast<double>(i) - low) / (high - low), 0.0), 1.0);
  return base / factor * ramp + base * (1.0 - ramp);
}

// yarn's attention factor rule: 0.1 m ln(scale) + 1, and 1 for scale <= 1.
BRAID_HD double yarn_mscale(double scale, double m) {
  return scale <= 1.0 ? 1.0 : 0.1 * m * std::log(scale) + 1.0;
}

}  // namespace braid::math
