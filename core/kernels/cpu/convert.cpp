// f32 <-> bf16/f16 array conversions: scalar, AVX2 (+F16C) and AVX-512 BF16 paths, the
// fastest one the context's instruction-set level allows. Each vector path is compiled with a
// target attribute, so the binary stays runnable on any x86-64 CPU.
#include "core/kernels/cpu/convert.h"

#include <omp.h>

#include <algorithm>
#include <cstring>

#include "core/error.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define BRAID_X86 1
#endif

namespace braid::cpu {
namespace {

void widen_scalar(DType t, const void* src, float* dst, int64_t n) {
  if (t == DType::BF16) {
    const bf16* s = static_cast<const bf16*>(src);
    for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_float(s[i]);
  } else {
    const f16* s = static_cast<const f16*>(src);
    for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_float(s[i]);
  }
}

void narrow_scalar(DType t, const float* src, void* dst, int64_t n) {
  if (t == DType::BF16) {
    bf16* d = static_cast<bf16*>(dst);
    for (int64_t i = 0; i < n; ++i) d[i] = float_to_bf16(src[i]);
  } else {
    f16* d = static_cast<f16*>(dst);
    for (int64_t i = 0; i < n; ++i) d[i] = float_to_f16(src[i]);
  }
}

#ifdef BRAID_X86

__attribute__((target("avx2,f16c"))) void widen_avx2(DType t, const void* src, float* dst,
                                                     int64_t n) {
  const uint16_t* s = static_cast<const uint16_t*>(src);
  int64_t i = 0;
  if (t == DType::BF16) {
    for (; i + 8 <= n; i += 8) {  // bf16 is the upper half of an f32: zero-extend and shift
      const __m256i w =
          _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i)));
      _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
    }
  } else {
    for (; i + 8 <= n; i += 8)
      _mm256_storeu_ps(dst + i,
                       _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i))));
  }
  widen_scalar(t, s + i, dst + i, n - i);
}

// Round to nearest even exactly as float_to_bf16 does, NaN kept quiet the same way, so this
// path and the scalar one give the same bits.
__attribute__((target("avx2,f16c"))) void narrow_avx2(DType t, const float* src, void* dst,
                                                      int64_t n) {
  uint16_t* d = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  if (t == DType::BF16) {
    const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff);
    const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
    const __m256i quiet = _mm256_set1_epi32(0x40);
    for (; i + 8 <= n; i += 8) {
      const __m256i u = _mm256_castps_si256(_mm256_loadu_ps(src + i));
      const __m256i hi = _mm256_srli_epi32(u, 16);
      const __m256i lsb = _mm256_and_si256(hi, one);
      const __m256i rounded =
          _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(bias, lsb)), 16);
      const __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs_mask), inf);
      const __m256i r = _mm256_blendv_epi8(rounded, _mm256_or_si256(hi, quiet), is_nan);
      // Every lane is <= 0xffff, so unsigned saturation packs without changing values; the
      // permute undoes the per-128-bit-lane interleave of packus.
      const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), _mm256_castsi256_si128(packed));
    }
  } else {
    for (; i + 8 <= n; i += 8) {
      const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), h);
    }
  }
  narrow_scalar(t, src + i, d + i, n - i);
}

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*() and warn about it
// (-Wmaybe-uninitialized inside avx512fintrin.h); the values are fully written.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) void widen_avx512(DType t,
                                                                                  const void* src,
                                                                                  float* dst,
                                                                                  int64_t n) {
  const uint16_t* s = static_cast<const uint16_t*>(src);
  int64_t i = 0;
  if (t == DType::BF16) {
    for (; i + 16 <= n; i += 16) {
      const __m512i w =
          _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i)));
      _mm512_storeu_ps(dst + i, _mm512_castsi512_ps(_mm512_slli_epi32(w, 16)));
    }
  } else {
    for (; i + 16 <= n; i += 16)
      _mm512_storeu_ps(
          dst + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i))));
  }
  widen_scalar(t, s + i, dst + i, n - i);
}

__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) void narrow_avx512(DType t,
                                                                                   const float* src,
                                                                                   void* dst,
                                                                                   int64_t n) {
  uint16_t* d = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  if (t == DType::BF16) {
    for (; i + 16 <= n; i += 16) {
      const __m256bh b = _mm512_cvtneps_pbh(_mm512_loadu_ps(src + i));
      std::memcpy(d + i, &b, sizeof(b));
    }
  } else {
    for (; i + 16 <= n; i += 16) {
      const __m256i h = _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), h);
    }
  }
  narrow_scalar(t, src + i, d + i, n - i);
}

#pragma GCC diagnostic pop

#endif  // BRAID_X86

void check_16bit(DType t, const char* what) {
  BRAID_CHECK(t == DType::BF16 || t == DType::F16 || t == DType::F32,
              "{}: cannot convert {} (only f32, bf16 and f16)", what, dtype_name(t));
}

constexpr int64_t kChunk = 1 << 15;  // elements per thread task

}  // namespace

const char* convert_isa_name(ConvertIsa isa) {
  switch (isa) {
    case ConvertIsa::Scalar:
      return "scalar";
    case ConvertIsa::Avx2:
      return "avx2";
    case ConvertIsa::Avx512Bf16:
      return "avx512_bf16";
  }
  return "?";
}

CpuIsa convert_isa_level(ConvertIsa isa) {
  switch (isa) {
    case ConvertIsa::Scalar:
      return CpuIsa::Scalar;
    case ConvertIsa::Avx2:
      return CpuIsa::Avx2;
    case ConvertIsa::Avx512Bf16:
      return CpuIsa::Avx512Bf16;
  }
  return CpuIsa::Amx;
}

ConvertIsa convert_path(CpuIsa level) {
  if (level >= CpuIsa::Avx512Bf16) return ConvertIsa::Avx512Bf16;
  if (level >= CpuIsa::Avx2) return ConvertIsa::Avx2;
  return ConvertIsa::Scalar;
}

std::string convert_isa_description(CpuIsa level) {
  const ConvertIsa isa = convert_path(level);
  if (isa == ConvertIsa::Avx512Bf16)
    return "bf16/f16 conversions: avx512_bf16 (native VCVTNEPS2BF16)";
  if (level == cpu_isa_detected())
    return fmt::format("bf16/f16 conversions: {} widening path (this CPU has no AVX512_BF16)",
                       convert_isa_name(isa));
  return fmt::format(
      "bf16/f16 conversions: {} widening path (instruction set capped at {}, below AVX512_BF16)",
      convert_isa_name(isa), cpu_isa_name(level));
}

void widen_to_f32(ConvertIsa isa, DType t, const void* src, float* dst, int64_t n) {
  check_16bit(t, "widen_to_f32");
  BRAID_CHECK(convert_isa_supported(isa), "widen_to_f32: cannot run the {} path: {}",
              convert_isa_name(isa), cpu_isa_missing(convert_isa_level(isa)));
  if (n <= 0) return;
  if (t == DType::F32) return static_cast<void>(std::memcpy(dst, src, sizeof(float) * n));
#ifdef BRAID_X86
  if (isa == ConvertIsa::Avx512Bf16) return widen_avx512(t, src, dst, n);
  if (isa == ConvertIsa::Avx2) return widen_avx2(t, src, dst, n);
#endif
  widen_scalar(t, src, dst, n);
}

void narrow_from_f32(ConvertIsa isa, DType t, const float* src, void* dst, int64_t n) {
  check_16bit(t, "narrow_from_f32");
  BRAID_CHECK(convert_isa_supported(isa), "narrow_from_f32: cannot run the {} path: {}",
              convert_isa_name(isa), cpu_isa_missing(convert_isa_level(isa)));
  if (n <= 0) return;
  if (t == DType::F32) return static_cast<void>(std::memcpy(dst, src, sizeof(float) * n));
#ifdef BRAID_X86
  if (isa == ConvertIsa::Avx512Bf16) return narrow_avx512(t, src, dst, n);
  if (isa == ConvertIsa::Avx2) return narrow_avx2(t, src, dst, n);
#endif
  narrow_scalar(t, src, dst, n);
}

void widen_to_f32(const ExecContext& ctx, DType t, const void* src, float* dst, int64_t n) {
  const ConvertIsa isa = convert_path(ctx.cpu_isa());
  const size_t es = dtype_size(t);
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (chunks > 1 && !omp_in_parallel())
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t b = c * kChunk;
    widen_to_f32(isa, t, static_cast<const char*>(src) + b * es, dst + b, std::min(kChunk, n - b));
  }
}

void narrow_from_f32(const ExecContext& ctx, DType t, const float* src, void* dst, int64_t n) {
  const ConvertIsa isa = convert_path(ctx.cpu_isa());
  const size_t es = dtype_size(t);
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (chunks > 1 && !omp_in_parallel())
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t b = c * kChunk;
    narrow_from_f32(isa, t, src + b, static_cast<char*>(dst) + b * es, std::min(kChunk, n - b));
  }
}

}  // namespace braid::cpu
