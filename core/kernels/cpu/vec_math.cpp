// Row primitives behind vec_math.h, cloned for AVX2+FMA and the x86-64 baseline; the loader
// picks the clone for the running CPU.
#include "core/kernels/cpu/vec_math.h"

#include <cmath>

namespace braid::cpu {

#if defined(__x86_64__) && defined(__GNUC__)
#define BRAID_VEC_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define BRAID_VEC_CLONES
#endif

BRAID_VEC_CLONES float softmax_row(float* s, int64_t n, float out_scale) {
  float m = s[0];
#pragma omp simd reduction(max : m)
  for (int64_t j = 0; j < n; ++j) m = std::max(m, s[j]);
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < n; ++j) {
    const float e = exp_approx(s[j] - m);
    s[j] = e;
    sum += e;
  }
  const float mul = out_scale / sum;
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) s[j] *= mul;
  return m + std::log(sum);
}

BRAID_VEC_CLONES void exp_shifted_row(float* s, int64_t n, float shift) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) s[j] = exp_approx(s[j] - shift);
}

BRAID_VEC_CLONES void softmax_grad_row(float* dp, const float* p, int64_t n, float d,
                                       float scale) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) dp[j] = p[j] * (dp[j] - d) * scale;
}

BRAID_VEC_CLONES float dot_row(const float* a, const float* b, int64_t n) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < n; ++j) sum += a[j] * b[j];
  return sum;
}

}  // namespace braid::cpu
