// Blocked transposes (core/kernels/cpu/transpose.h).
#include "core/kernels/cpu/transpose.h"

#include <algorithm>
#include <cstring>

#if defined(__x86_64__) || defined(_M_X64)
#define BRAID_X86 1
#include <immintrin.h>
#endif

namespace braid::cpu {

namespace {

#ifdef BRAID_X86
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*() and warn about it
// (-W(maybe-)uninitialized inside avx512fintrin.h); the values are fully written.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

// r[i] holds row i of a 16 x 16 block of 32-bit lanes; afterwards r[i] holds column i.
__attribute__((target("avx512f"))) inline void transpose16(__m512i r[16]) {
  __m512i t[16];
  // Within each 128-bit lane: interleave rows 2k, 2k+1 (32-bit), then pairs of those (64-bit),
  // so that lane L of u[4g + j] holds column 4L + j of rows 4g .. 4g + 3.
  for (int k = 0; k < 8; ++k) {
    t[2 * k] = _mm512_unpacklo_epi32(r[2 * k], r[2 * k + 1]);
    t[2 * k + 1] = _mm512_unpackhi_epi32(r[2 * k], r[2 * k + 1]);
  }
  __m512i u[16];
  for (int g = 0; g < 4; ++g) {
    const __m512i a = t[4 * g], b = t[4 * g + 1], c = t[4 * g + 2], d = t[4 * g + 3];
    u[4 * g + 0] = _mm512_unpacklo_epi64(a, c);  // column 4L + 0
    u[4 * g + 1] = _mm512_unpackhi_epi64(a, c);  // column 4L + 1
    u[4 * g + 2] = _mm512_unpacklo_epi64(b, d);  // column 4L + 2
    u[4 * g + 3] = _mm512_unpackhi_epi64(b, d);  // column 4L + 3
  }
  // Now 128-bit lane L of u[4g + j] = column 4L + j, rows 4g .. 4g + 3. Gather the four row
  // groups of each column: first lanes {0, 2} / {1, 3} of groups (0, 1) and (2, 3), then across.
  for (int j = 0; j < 4; ++j) {
    const __m512i g0 = u[j], g1 = u[4 + j], g2 = u[8 + j], g3 = u[12 + j];
    // v01e: lanes (g0.L0, g0.L2, g1.L0, g1.L2); v01o: (g0.L1, g0.L3, g1.L1, g1.L3)
    const __m512i v01e = _mm512_shuffle_i32x4(g0, g1, 0x88);
    const __m512i v01o = _mm512_shuffle_i32x4(g0, g1, 0xdd);
    const __m512i v23e = _mm512_shuffle_i32x4(g2, g3, 0x88);
    const __m512i v23o = _mm512_shuffle_i32x4(g2, g3, 0xdd);
    // column 4L + j: lanes (g0.LL, g1.LL, g2.LL, g3.LL)
    r[j + 0] = _mm512_shuffle_i32x4(v01e, v23e, 0x88);   // L = 0
    r[j + 8] = _mm512_shuffle_i32x4(v01e, v23e, 0xdd);   // L = 2
    r[j + 4] = _mm512_shuffle_i32x4(v01o, v23o, 0x88);   // L = 1
    r[j + 12] = _mm512_shuffle_i32x4(v01o, v23o, 0xdd);  // L = 3
  }
}

__attribute__((target("avx512f"))) void block_u32(uint32_t* dst, int64_t ldd, const uint32_t* src,
                                                  int64_t lds) {
  __m512i r[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_si512(src + i * lds);
  transpose16(r);
  for (int i = 0; i < 16; ++i) _mm512_storeu_si512(dst + i * ldd, r[i]);
}

__attribute__((target("avx512f"))) void block_u16(uint16_t* dst, int64_t ldd, const uint16_t* src,
                                                  int64_t lds) {
  __m512i r[16];
  for (int i = 0; i < 16; ++i)
    r[i] =
        _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i * lds)));
  transpose16(r);
  for (int i = 0; i < 16; ++i)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i * ldd), _mm512_cvtepi32_epi16(r[i]));
}

__attribute__((target("avx512f,avx512bf16"))) void block_f32_bf16(uint16_t* dst, int64_t ldd,
                                                                  const float* src, int64_t lds) {
  __m512i r[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_castps_si512(_mm512_loadu_ps(src + i * lds));
  transpose16(r);
  for (int i = 0; i < 16; ++i) {
    const __m256bh b = _mm512_cvtneps_pbh(_mm512_castsi512_ps(r[i]));
    std::memcpy(dst + i * ldd, &b, sizeof(b));
  }
}

#pragma GCC diagnostic pop
#endif  // BRAID_X86

template <class T>
void plain(T* dst, int64_t ldd, const T* src, int64_t lds, int64_t r0, int64_t r1, int64_t c0,
           int64_t c1) {
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t c = c0; c < c1; ++c) dst[c * ldd + r] = src[r * lds + c];
}

// The 16 x 16 blocks by `block`, the right and bottom edges by `edge(r0, r1, c0, c1)`.
template <class Block, class Edge>
void tiled(int64_t rows, int64_t cols, Block block, Edge edge) {
  const int64_t R = rows & ~int64_t{15}, C = cols & ~int64_t{15};
  for (int64_t r = 0; r < R; r += 16)
    for (int64_t c = 0; c < C; c += 16) block(r, c);
  if (C < cols) edge(0, R, C, cols);
  if (R < rows) edge(R, rows, 0, cols);
}

// 16 x 16 blocks by `block` (a block_u32 / block_u16) at AVX-512 and up, plain loops elsewhere.
template <class T, class Block>
void transpose_with(CpuIsa isa, Block block, T* dst, int64_t ldd, const T* src, int64_t lds,
                    int64_t rows, int64_t cols) {
#ifdef BRAID_X86
  if (isa >= CpuIsa::Avx512) {
    return tiled(
        rows, cols,
        [&](int64_t r, int64_t c) { block(dst + c * ldd + r, ldd, src + r * lds + c, lds); },
        [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
          plain(dst, ldd, src, lds, r0, r1, c0, c1);
        });
  }
#else
  (void)block;
#endif
  (void)isa;
  plain(dst, ldd, src, lds, 0, rows, 0, cols);
}

#ifndef BRAID_X86
// Never called off x86 (the level is never AVX-512 there); a name for transpose_with.
void block_u32(uint32_t*, int64_t, const uint32_t*, int64_t) {}
void block_u16(uint16_t*, int64_t, const uint16_t*, int64_t) {}
#endif

}  // namespace

void transpose_u32(CpuIsa isa, uint32_t* dst, int64_t ldd, const uint32_t* src, int64_t lds,
                   int64_t rows, int64_t cols) {
  transpose_with(isa, block_u32, dst, ldd, src, lds, rows, cols);
}

void transpose_u16(CpuIsa isa, uint16_t* dst, int64_t ldd, const uint16_t* src, int64_t lds,
                   int64_t rows, int64_t cols) {
  transpose_with(isa, block_u16, dst, ldd, src, lds, rows, cols);
}

void transpose_f32_to_bf16(ConvertIsa path, CpuIsa isa, uint16_t* dst, int64_t ldd,
                           const float* src, int64_t lds, int64_t rows, int64_t cols) {
  // An edge: each output row's piece gathered, then narrowed as a row. The blocks below round
  // with VCVTNEPS2BF16, which is the Avx512Bf16 path's narrowing; a row narrowed whole on that
  // path also takes its last rows % 16 elements through the scalar rounding, which is why the
  // bottom edge (r >= rows rounded down to 16) goes through narrow_from_f32 too.
  auto edge = [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    float row[16];
    for (int64_t c = c0; c < c1; ++c)
      for (int64_t s = r0; s < r1; s += 16) {
        const int64_t n = std::min<int64_t>(16, r1 - s);
        for (int64_t i = 0; i < n; ++i) row[i] = src[(s + i) * lds + c];
        narrow_from_f32(path, DType::BF16, row, dst + c * ldd + s, n);
      }
  };
#ifdef BRAID_X86
  if (path == ConvertIsa::Avx512Bf16 && isa >= CpuIsa::Avx512Bf16) {
    return tiled(
        rows, cols,
        [&](int64_t r, int64_t c) {
          block_f32_bf16(dst + c * ldd + r, ldd, src + r * lds + c, lds);
        },
        edge);
  }
#endif
  (void)isa;
  edge(0, rows, 0, cols);
}

}  // namespace braid::cpu
