// Per-element block-wise quantisation, shared by the CPU kernels (core/kernels/cpu/quantize.cpp)
// and a CUDA twin: the NF4 code table of QLoRA (Dettmers et al. 2023, as bitsandbytes ships
// it), symmetric int8, and the nearest-code search bitsandbytes uses for every sorted code
// (its CPU path: bucketize on the midpoints, so a value exactly on a midpoint takes the lower
// code). A value is stored as code[q] * absmax of its block.
#pragma once

#include <cstdint>

#include "core/kernels/math/hd.h"

namespace braid::math {

// NF4 code q in [0, 16): the table of bitsandbytes' get_4bit_type("nf4").
BRAID_HD float nf4_value(int q) {
  const float t[16] = {-1.0f,
                       -0.6961928009986877f,
                       -0.5250730514526367f,
                       -0.39491748809814453f,
                       -0.28444138169288635f,
                       -0.18477343022823334f,
                       -0.09105003625154495f,
                       0.0f,
                       0.07958029955625534f,
                       0.16093020141124725f,
                       0.24611230194568634f,
                       0.33791524171829224f,
                       0.44070982933044434f,
                       0.5626170039176941f,
                       0.7229568362236023f,
                       1.0f};
  return t[q & 15];
}

// The index of the nearest of n sorted codes to x: the first i whose upper midpoint
// (code[i] + code[i+1]) / 2 (in float) is >= x. NaN maps to the last code.
BRAID_HD int nearest_code(const float* code, int n, float x) {
  int lo = 0, hi = n - 1;  // answer in [lo, hi]
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    const float bound = (code[mid] + code[mid + 1]) / 2.0f;
    if (x <= bound)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

BRAID_HD int nf4_encode(float x) {  // x scaled to [-1, 1]
  float t[16];
  for (int i = 0; i < 16; ++i) t[i] = nf4_value(i);
  return nearest_code(t, 16, x);
}

// Symmetric int8: q = round(127 x) for x in [-1, 1], stored as the byte of the int8.
BRAID_HD float int8_value(int q) { return static_cast<float>(static_cast<int8_t>(q)) / 127.0f; }
BRAID_HD int int8_encode(float x) {
  const float s = x * 127.0f;
  const float r = s >= 0.0f ? static_cast<float>(static_cast<int>(s + 0.5f))
                            : -static_cast<float>(static_cast<int>(-s + 0.5f));
  const int q = r > 127.0f ? 127 : (r < -127.0f ? -127 : static_cast<int>(r));
  return static_cast<uint8_t>(static_cast<int8_t>(q));
}

// The reciprocal a block's values are multiplied by (bitsandbytes clamps a zero absmax to
// 1e-38, which makes every value of an all-zero block 0).
BRAID_HD float block_scale(float absmax) { return 1.0f / (absmax > 1e-38f ? absmax : 1e-38f); }

BRAID_HD float clamp_unit(float x) { return x < -1.0f ? -1.0f : (x > 1.0f ? 1.0f : x); }

// The i-th code of a packed NF4 array: two codes per byte, the even element in the high nibble.
BRAID_HD int nf4_code_at(const uint8_t* packed, int64_t i) {
  const uint8_t b = packed[i >> 1];
  return (i & 1) ? (b & 15) : (b >> 4);
}

}  // namespace braid::math
