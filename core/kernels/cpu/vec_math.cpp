// Row primitives behind vec_math.h: AVX2+FMA intrinsics from the Avx2 instruction-set level up
// (the build targets the x86-64 baseline, and GCC left these loops scalar when asked to
// auto-vectorise them), and portable scalar loops below it.
#include "core/kernels/cpu/vec_math.h"

#include <cmath>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define BRAID_HAVE_AVX2_PATH 1
#endif

namespace braid::cpu {

namespace scalar {

float exp_shifted_sum_row(float* s, int64_t n, float shift) {
  float sum = 0.0f;
  for (int64_t j = 0; j < n; ++j) {
    s[j] = exp_approx(s[j] - shift);
    sum += s[j];
  }
  return sum;
}

float softmax_row(float* s, int64_t n, float out_scale) {
  float m = s[0];
  for (int64_t j = 1; j < n; ++j) m = std::max(m, s[j]);
  const float sum = exp_shifted_sum_row(s, n, m);
  const float mul = out_scale / sum;
  for (int64_t j = 0; j < n; ++j) s[j] *= mul;
  return m + std::log(sum);
}

void exp_shifted_row(float* s, int64_t n, float shift) {
  for (int64_t j = 0; j < n; ++j) s[j] = exp_approx(s[j] - shift);
}

void softmax_grad_row(float* dp, const float* p, int64_t n, float d, float scale) {
  for (int64_t j = 0; j < n; ++j) dp[j] = p[j] * (dp[j] - d) * scale;
}

float dot_row(const float* a, const float* b, int64_t n) {
  float sum = 0.0f;
  for (int64_t j = 0; j < n; ++j) sum += a[j] * b[j];
  return sum;
}

}  // namespace scalar

#ifdef BRAID_HAVE_AVX2_PATH
namespace avx2 {

#define BRAID_AVX2 __attribute__((target("avx2,fma")))

// Eight lanes of exp_approx (same constants, same clamping; NaN passes through because the
// max/min intrinsics return their second operand when it is NaN).
BRAID_AVX2 inline __m256 exp8(__m256 x) {
  x = _mm256_min_ps(_mm256_set1_ps(88.0f), _mm256_max_ps(_mm256_set1_ps(-87.0f), x));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.42860682030941723e-06f), r);
  __m256 p = _mm256_set1_ps(1.0f / 720.0f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  const __m256i bits =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
}

// Lanes added in a fixed order, so results do not depend on anything but the input.
BRAID_AVX2 inline float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

BRAID_AVX2 inline float hmax8(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Lanes [0, n) of 8 (n in 0..8).
BRAID_AVX2 inline __m256i tail_mask(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// The last n % 8 elements of a row (t = n - n % 8 is where they start): exp8 of s - shift on
// one masked vector, so a short row's tail costs one vector exp rather than up to seven scalar
// ones. Returns their sum, added in element order (the order of a scalar loop).
BRAID_AVX2 inline float exp_tail(float* s, int64_t t, int64_t n, __m256 shift) {
  if (t == n) return 0.0f;
  const __m256i mask = tail_mask(n - t);
  const __m256 e = exp8(_mm256_sub_ps(_mm256_maskload_ps(s + t, mask), shift));
  _mm256_maskstore_ps(s + t, mask, e);
  float sum = 0.0f;
  for (int64_t j = t; j < n; ++j) sum += s[j];
  return sum;
}

// s <- exp(s - shift), returning the sum: two 8-lane accumulators over 16-element chunks, one
// more chunk of 8, then the masked tail.
BRAID_AVX2 float exp_shifted_sum_row(float* s, int64_t n, float shift) {
  const int64_t n8 = n - n % 8;
  const __m256 vm = _mm256_set1_ps(shift);
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 16 <= n8; j += 16) {
    const __m256 e0 = exp8(_mm256_sub_ps(_mm256_loadu_ps(s + j), vm));
    const __m256 e1 = exp8(_mm256_sub_ps(_mm256_loadu_ps(s + j + 8), vm));
    _mm256_storeu_ps(s + j, e0);
    _mm256_storeu_ps(s + j + 8, e1);
    acc0 = _mm256_add_ps(acc0, e0);
    acc1 = _mm256_add_ps(acc1, e1);
  }
  for (; j < n8; j += 8) {
    const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(s + j), vm));
    _mm256_storeu_ps(s + j, e);
    acc0 = _mm256_add_ps(acc0, e);
  }
  return hsum8(_mm256_add_ps(acc0, acc1)) + exp_tail(s, n8, n, vm);
}

BRAID_AVX2 float softmax_row(float* s, int64_t n, float out_scale) {
  const int64_t n8 = n - n % 8;
  __m256 vmax = _mm256_set1_ps(s[0]);
  for (int64_t j = 0; j < n8; j += 8) vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(s + j));
  float m = hmax8(vmax);
  for (int64_t j = n8; j < n; ++j) m = std::max(m, s[j]);
  const float sum = exp_shifted_sum_row(s, n, m);
  const float mul = out_scale / sum;
  const __m256 vmul = _mm256_set1_ps(mul);
  int64_t j = 0;
  for (; j < n8; j += 8) _mm256_storeu_ps(s + j, _mm256_mul_ps(_mm256_loadu_ps(s + j), vmul));
  for (j = n8; j < n; ++j) s[j] *= mul;
  return m + std::log(sum);
}

BRAID_AVX2 void exp_shifted_row(float* s, int64_t n, float shift) {
  const int64_t n8 = n - n % 8;
  const __m256 vs = _mm256_set1_ps(shift);
  for (int64_t j = 0; j < n8; j += 8)
    _mm256_storeu_ps(s + j, exp8(_mm256_sub_ps(_mm256_loadu_ps(s + j), vs)));
  exp_tail(s, n8, n, vs);
}

BRAID_AVX2 void softmax_grad_row(float* dp, const float* p, int64_t n, float d, float scale) {
  const int64_t n8 = n - n % 8;
  const __m256 vd = _mm256_set1_ps(d), vscale = _mm256_set1_ps(scale);
  for (int64_t j = 0; j < n8; j += 8) {
    const __m256 g = _mm256_sub_ps(_mm256_loadu_ps(dp + j), vd);
    _mm256_storeu_ps(dp + j, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(p + j), g), vscale));
  }
  for (int64_t j = n8; j < n; ++j) dp[j] = p[j] * (dp[j] - d) * scale;
}

BRAID_AVX2 float dot_row(const float* a, const float* b, int64_t n) {
  const int64_t n8 = n - n % 8;
  __m256 acc = _mm256_setzero_ps();
  for (int64_t j = 0; j < n8; j += 8)
    acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + j), _mm256_loadu_ps(b + j), acc);
  float sum = hsum8(acc);
  for (int64_t j = n8; j < n; ++j) sum += a[j] * b[j];
  return sum;
}

}  // namespace avx2

// The same rows 16 lanes at a time, bit for bit the AVX2 results: each lane runs exp8's
// operations, the elements below n - n % 8 are the 16- and 8-lane ones and the rest go through
// AVX2's masked tail (exp_tail), and softmax_row's sum keeps AVX2's two 8-lane accumulators as the
// two halves of one zmm register (an odd 8-element chunk goes to the lower one) before the same
// final reduction. dot_row keeps the AVX2 loop: a 16-lane sum would change its order.
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*() and warn about it inside
// avx512fintrin.h; every lane is written.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
namespace avx512 {

#define BRAID_AVX512 __attribute__((target("avx512f,avx2,fma")))

BRAID_AVX512 inline __m512 exp16(__m512 x) {
  x = _mm512_min_ps(_mm512_set1_ps(88.0f), _mm512_max_ps(_mm512_set1_ps(-87.0f), x));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.42860682030941723e-06f), r);
  __m512 p = _mm512_set1_ps(1.0f / 720.0f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  const __m512i bits =
      _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  return _mm512_mul_ps(p, _mm512_castsi512_ps(bits));
}

BRAID_AVX512 inline __m256 low8(__m512 v) { return _mm512_castps512_ps256(v); }
BRAID_AVX512 inline __m256 high8(__m512 v) {
  return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
}

BRAID_AVX512 float exp_shifted_sum_row(float* s, int64_t n, float shift) {
  const int64_t n8 = n - n % 8;
  const __m512 vm = _mm512_set1_ps(shift);
  __m512 acc = _mm512_setzero_ps();  // lanes 0-7: AVX2's acc0, lanes 8-15: its acc1
  int64_t j = 0;
  for (; j + 16 <= n8; j += 16) {
    const __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(s + j), vm));
    _mm512_storeu_ps(s + j, e);
    acc = _mm512_add_ps(acc, e);
  }
  __m256 acc0 = low8(acc);
  if (j < n8) {
    const __m256 e = avx2::exp8(_mm256_sub_ps(_mm256_loadu_ps(s + j), _mm256_set1_ps(shift)));
    _mm256_storeu_ps(s + j, e);
    acc0 = _mm256_add_ps(acc0, e);
  }
  return avx2::hsum8(_mm256_add_ps(acc0, high8(acc))) +
         avx2::exp_tail(s, n8, n, _mm256_set1_ps(shift));
}

BRAID_AVX512 float softmax_row(float* s, int64_t n, float out_scale) {
  const int64_t n8 = n - n % 8;
  // The maximum does not depend on the order (finite inputs; a NaN makes every output NaN
  // through the sum either way).
  __m512 vmax16 = _mm512_set1_ps(s[0]);
  int64_t j = 0;
  for (; j + 16 <= n8; j += 16) vmax16 = _mm512_max_ps(vmax16, _mm512_loadu_ps(s + j));
  __m256 vmax = _mm256_max_ps(low8(vmax16), high8(vmax16));
  for (; j < n8; j += 8) vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(s + j));
  float m = avx2::hmax8(vmax);
  for (j = n8; j < n; ++j) m = std::max(m, s[j]);
  const float sum = exp_shifted_sum_row(s, n, m);
  const float mul = out_scale / sum;
  const __m512 vmul = _mm512_set1_ps(mul);
  for (j = 0; j + 16 <= n8; j += 16)
    _mm512_storeu_ps(s + j, _mm512_mul_ps(_mm512_loadu_ps(s + j), vmul));
  for (; j < n8; j += 8)
    _mm256_storeu_ps(s + j, _mm256_mul_ps(_mm256_loadu_ps(s + j), _mm256_set1_ps(mul)));
  for (j = n8; j < n; ++j) s[j] *= mul;
  return m + std::log(sum);
}

BRAID_AVX512 void exp_shifted_row(float* s, int64_t n, float shift) {
  const int64_t n8 = n - n % 8;
  const __m512 vs = _mm512_set1_ps(shift);
  int64_t j = 0;
  for (; j + 16 <= n8; j += 16)
    _mm512_storeu_ps(s + j, exp16(_mm512_sub_ps(_mm512_loadu_ps(s + j), vs)));
  for (; j < n8; j += 8)
    _mm256_storeu_ps(s + j,
                     avx2::exp8(_mm256_sub_ps(_mm256_loadu_ps(s + j), _mm256_set1_ps(shift))));
  avx2::exp_tail(s, n8, n, _mm256_set1_ps(shift));
}

BRAID_AVX512 void softmax_grad_row(float* dp, const float* p, int64_t n, float d, float scale) {
  const int64_t n8 = n - n % 8;
  const __m512 vd = _mm512_set1_ps(d), vscale = _mm512_set1_ps(scale);
  int64_t j = 0;
  for (; j + 16 <= n8; j += 16) {
    const __m512 g = _mm512_sub_ps(_mm512_loadu_ps(dp + j), vd);
    _mm512_storeu_ps(dp + j, _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(p + j), g), vscale));
  }
  for (; j < n8; j += 8) {
    const __m256 g = _mm256_sub_ps(_mm256_loadu_ps(dp + j), _mm256_set1_ps(d));
    _mm256_storeu_ps(
        dp + j, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(p + j), g), _mm256_set1_ps(scale)));
  }
  for (j = n8; j < n; ++j) dp[j] = p[j] * (dp[j] - d) * scale;
}

BRAID_AVX512 float dot_row(const float* a, const float* b, int64_t n) {
  return avx2::dot_row(a, b, n);
}

#undef BRAID_AVX512

}  // namespace avx512
#pragma GCC diagnostic pop

#undef BRAID_AVX2

#define BRAID_DISPATCH(fn, ...)                          \
  return isa >= CpuIsa::Avx512 ? avx512::fn(__VA_ARGS__) \
         : isa >= CpuIsa::Avx2 ? avx2::fn(__VA_ARGS__)   \
                               : scalar::fn(__VA_ARGS__)
#else
#define BRAID_DISPATCH(fn, ...) return ((void)isa, scalar::fn(__VA_ARGS__))
#endif

float softmax_row(CpuIsa isa, float* s, int64_t n, float out_scale) {
  BRAID_DISPATCH(softmax_row, s, n, out_scale);
}

void exp_shifted_row(CpuIsa isa, float* s, int64_t n, float shift) {
  BRAID_DISPATCH(exp_shifted_row, s, n, shift);
}

float exp_shifted_sum_row(CpuIsa isa, float* s, int64_t n, float shift) {
  BRAID_DISPATCH(exp_shifted_sum_row, s, n, shift);
}

void softmax_grad_row(CpuIsa isa, float* dp, const float* p, int64_t n, float d, float scale) {
  BRAID_DISPATCH(softmax_grad_row, dp, p, n, d, scale);
}

float dot_row(CpuIsa isa, const float* a, const float* b, int64_t n) {
  BRAID_DISPATCH(dot_row, a, b, n);
}

}  // namespace braid::cpu
