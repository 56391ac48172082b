// Branch-free float exp and sigmoid that the compiler can vectorise inside `omp simd` loops
// (glibc's expf/tanhf are scalar calls unless built with -ffast-math).
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>

namespace braid::cpu {

// exp(x) with about 1 ulp relative error for x in [-87, 88]; inputs outside are clamped
// there, so the result is always finite and nonzero (callers only need it in ratios).
inline float exp_f32(float x) {
  x = std::min(std::max(x, -87.0f), 88.0f);
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
  const float n_exp = std::min(127.0f, std::max(-126.0f, n));
  const int32_t bits = (static_cast<int32_t>(n_exp) + 127) << 23;
  return p * std::bit_cast<float>(bits);
}

// 1 / (1 + exp(-x)); saturates cleanly to ~0 and 1 for large |x|.
inline float sigmoid_f32(float x) { return 1.0f / (1.0f + exp_f32(-x)); }

}  // namespace braid::cpu

// Compute-bound loops are also compiled for AVX2+FMA and AVX-512 (GCC function multi-versioning:
// the loader picks the best clone for the CPU), since the build targets baseline x86-64. About
// 4x on GELU with AVX2 over the SSE2 baseline.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define BRAID_CPU_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define BRAID_CPU_CLONES
#endif
