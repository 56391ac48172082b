// Vectorised row primitives (fast exp, softmax rows) shared by the CPU attention and
// cross-entropy kernels.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "core/kernels/cpu/cpu_isa.h"

namespace braid::cpu {

// exp(x) with ~2e-7 relative error, written so that loops over it vectorise (glibc's expf
// does not without -ffast-math). Inputs are clamped to [-87, 88] so the result stays a
// normal float; NaN stays NaN.
inline float exp_approx(float x) {
  x = std::min(std::max(x, -87.0f), 88.0f);
  const float round_magic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float n = (x * 1.44269504088896341f + round_magic) - round_magic;
  // Cody-Waite split of ln 2 keeps r exact enough for the polynomial.
  float r = x - n * 0.693145751953125f;
  r = r - n * 1.42860682030941723e-06f;
  float p = 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  // n is in [-126, 127] for the clamped x; a NaN n (NaN input, whose p is NaN anyway) is mapped
  // into that range too, because converting NaN to int, or (n + 127) << 23 out of range, is
  // undefined behaviour (UBSan reported it for a diverged run's NaN logits).
  const float n_exp = std::min(127.0f, std::max(-126.0f, n));
  const int32_t bits = (static_cast<int32_t>(n_exp) + 127) * (1 << 23);
  float two_n;
  std::memcpy(&two_n, &bits, sizeof(two_n));
  return p * two_n;
}

// Each row function takes the context's instruction-set level first: AVX2+FMA from Avx2 up,
// scalar below (the two paths round differently); it must be a level this CPU supports.

// s (n) <- out_scale * softmax(s); returns log(sum(exp(s))) of the input (n >= 1).
float softmax_row(CpuIsa isa, float* s, int64_t n, float out_scale);

// s (n) <- exp(s - shift).
void exp_shifted_row(CpuIsa isa, float* s, int64_t n, float shift);

// s (n) <- exp(s - shift); returns their sum (0 for n = 0), added as softmax_row adds its
// exponentials (the same bits at every level from AVX2 up).
float exp_shifted_sum_row(CpuIsa isa, float* s, int64_t n, float shift);

// dp (n) <- p * (dp - d) * scale: the softmax backward for one row, d = sum(p * dp).
void softmax_grad_row(CpuIsa isa, float* dp, const float* p, int64_t n, float d, float scale);

// sum(a * b) over n elements.
float dot_row(CpuIsa isa, const float* a, const float* b, int64_t n);

}  // namespace braid::cpu
