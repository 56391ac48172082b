// Rotary position embedding's arithmetic (HF Llama "rotate half"), shared by the CPU kernel
// (core/kernels/cpu/rope.cpp) and the CUDA one: the pair frequency and angle in double (an
// angle at position 1e5 would lose ~1e-3 rad in float), and the rotation of one (i, i + D/2)
// pair in float.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/kernels/math/hd.h"

namespace braid::math {

// freq_i = theta^(-2i/D), i in [0, D/2).
BRAID_HD double rope_freq(int64_t i, int64_t D, double theta) {
  const double exponent = static_cast<double>(2 * i) / static_cast<double>(D);
  return 1.0 / pow(theta, exponent);
}

// (a, c) rotated by the angle whose cosine and sine are cos_a and sin_a (sin_a negated for the
// backward): (a cos - c sin, c cos + a sin).
BRAID_HD void rope_rotate_pair(float a, float c, float cos_a, float sin_a, float& x1, float& x2) {
  x1 = a * cos_a - c * sin_a;
  x2 = c * cos_a + a * sin_a;
}

}  // namespace braid::math
