// Dequantisation of weight tiles for the quantised linear (core/kernels/cpu/dequantize_tile.h).
#include "core/kernels/cpu/dequantize_tile.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/kernels/math/quantize.h"

namespace braid::cpu {

namespace {

float code_value(QuantCode code, int k) {
  return code == QuantCode::Nf4 ? math::nf4_value(k) : math::int8_value(k);
}

// Values [i0, i1) of one block (scale a): the reference loop, one value at a time.
void span_scalar(void* dst, DType dt, const uint8_t* q, QuantCode code, float a, int64_t begin,
                 int64_t i0, int64_t i1) {
  float* yf = static_cast<float*>(dst);
  bf16* yb = static_cast<bf16*>(dst);
  for (int64_t i = i0; i < i1; ++i) {
    const int k = code == QuantCode::Nf4 ? math::nf4_code_at(q, i) : q[i];
    const float v = code_value(code, k) * a;
    if (dt == DType::BF16)
      yb[i - begin] = float_to_bf16(v);
    else
      yf[i - begin] = v;
  }
}

// GCC 12 flags the intrinsics' own undefined-vector arguments.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#define BRAID_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

// 16 values from i (even for NF4) of one block with scale a.
BRAID_AVX512 inline __m512 values16(const uint8_t* q, QuantCode code, __m512 table, __m512 a,
                                    int64_t i) {
  if (code == QuantCode::Nf4) {
    uint64_t packed;
    std::memcpy(&packed, q + i / 2, 8);
    const __m128i b = _mm_cvtsi64_si128(static_cast<long long>(packed));
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(b, 4), _mm_set1_epi8(15));
    const __m128i lo = _mm_and_si128(b, _mm_set1_epi8(15));
    // element 2j is byte j's high nibble (bitsandbytes' packing)
    const __m512i idx = _mm512_cvtepu8_epi32(_mm_unpacklo_epi8(hi, lo));
    return _mm512_mul_ps(_mm512_permutexvar_ps(idx, table), a);
  }
  const __m512 v = _mm512_cvtepi32_ps(
      _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + i))));
  return _mm512_mul_ps(_mm512_div_ps(v, _mm512_set1_ps(127.0f)), a);  // as int8_value, then * a
}

BRAID_AVX512 void tile_avx512(void* dst, DType dt, const uint8_t* q, const float* absmax,
                              QuantCode code, int64_t block, int64_t begin, int64_t n) {
  alignas(64) float t[16];
  for (int k = 0; k < 16; ++k) t[k] = math::nf4_value(k);
  const __m512 table = _mm512_load_ps(t);
  float* yf = static_cast<float*>(dst);
  uint16_t* yb = static_cast<uint16_t*>(dst);
  const int64_t end = begin + n;
  for (int64_t i = begin; i < end;) {
    const int64_t b = i / block;
    const int64_t block_end = std::min(end, (b + 1) * block);
    const float a = absmax[b];
    const __m512 av = _mm512_set1_ps(a);
    // Scalar up to an even start for NF4 (two codes a byte), then 16 at a time.
    int64_t j = i;
    if (code == QuantCode::Nf4 && (j & 1) && j < block_end) {
      span_scalar(dst, dt, q, code, a, begin, j, j + 1);
      ++j;
    }
    for (; j + 16 <= block_end; j += 16) {
      const __m512 v = values16(q, code, table, av, j);
      if (dt == DType::BF16) {
        const __m256bh h = _mm512_cvtneps_pbh(v);
        std::memcpy(yb + (j - begin), &h, sizeof(h));
      } else {
        _mm512_storeu_ps(yf + (j - begin), v);
      }
    }
    span_scalar(dst, dt, q, code, a, begin, j, block_end);
    i = block_end;
  }
}

#undef BRAID_AVX512
#pragma GCC diagnostic pop

}  // namespace

void dequantize_tile(CpuIsa isa, void* dst, DType dt, const uint8_t* q, const float* absmax,
                     QuantCode code, int64_t block, int64_t begin, int64_t n) {
  BRAID_CHECK(code == QuantCode::Nf4 || code == QuantCode::Int8,
              "dequantize_tile: a weight is NF4 or int8");
  BRAID_CHECK(dt == DType::F32 || dt == DType::BF16, "dequantize_tile: f32 or bf16 output");
  if (isa >= CpuIsa::Avx512Bf16) {
    tile_avx512(dst, dt, q, absmax, code, block, begin, n);
    return;
  }
  for (int64_t i = begin; i < begin + n;) {
    const int64_t b = i / block;
    const int64_t block_end = std::min(begin + n, (b + 1) * block);
    span_scalar(dst, dt, q, code, absmax[b], begin, i, block_end);
    i = block_end;
  }
}

}  // namespace braid::cpu
