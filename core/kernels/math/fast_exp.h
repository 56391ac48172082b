// Branch-free float exp and sigmoid, shared by the CPU activations (vectorised inside `omp simd`
// loops, where glibc's expf would be a scalar call) and their CUDA twins, so both backends
// compute GELU and SwiGLU with the same approximation.
#pragma once

#include <cstdint>

#include "core/kernels/math/hd.h"

#ifndef __CUDA_ARCH__
#include <algorithm>
#include <bit>
#endif

namespace braid::math {

// exp(x) with about 1 ulp relative error for x in [-87, 88]; inputs outside are clamped
// there, so the result is always finite and nonzero (callers only need it in ratios).
BRAID_HD float exp_f32(float x) {
#ifdef __CUDA_ARCH__  // std::max / std::min spelled out: a NaN x stays NaN, as on the host
  x = x < -87.0f ? -87.0f : x;
  x = 88.0f < x ? 88.0f : x;
#else
  x = std::min(std::max(x, -87.0f), 88.0f);
#endif
  // n = round(x / ln 2) via the 1.5 * 2^23 trick (rounding by the FPU, vectorisable on SSE2).
  constexpr float kRound = 12582912.0f;
  const float n = (x * 1.44269504088896341f + kRound) - kRound;
  // r = x - n ln2 in two steps so that r keeps full precision (Cody-Waite).
  float r = x - n * 0.693359375f;
  r = r + n * 2.12194440e-4f;
  // Taylor series of e^r for |r| <= ln2 / 2; degree 7 keeps the truncation below 1e-8.
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  // n is in [-126, 127] for the clamped x; the clamp also maps a NaN n (NaN input, p is NaN
  // anyway) into range, since converting NaN to int is undefined behaviour.
#ifdef __CUDA_ARCH__
  float n_exp = -126.0f < n ? n : -126.0f;
  n_exp = n_exp < 127.0f ? n_exp : 127.0f;
  return p * __int_as_float((static_cast<int32_t>(n_exp) + 127) << 23);
#else
  const float n_exp = std::min(127.0f, std::max(-126.0f, n));
  const int32_t bits = (static_cast<int32_t>(n_exp) + 127) << 23;
  return p * std::bit_cast<float>(bits);
#endif
}

// 1 / (1 + exp(-x)); saturates cleanly to ~0 and 1 for large |x|.
BRAID_HD float sigmoid_f32(float x) { return 1.0f / (1.0f + exp_f32(-x)); }

}  // namespace braid::math
