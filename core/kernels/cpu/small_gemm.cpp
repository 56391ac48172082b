// Small single-threaded GEMM: 6 x 16 AVX2 and 12 x 32 AVX-512 register tiles with masked edges,
// plus scalar loops for levels below Avx2; the bf16 pair product on VDPBF16PS and AMX tiles.
#include "core/kernels/cpu/small_gemm.h"

#include <algorithm>
#include <cstring>
#include <utility>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define BRAID_HAVE_AVX2_PATH 1
#endif

namespace braid::cpu {

namespace {

// f(std::integral_constant<int, rows>{}) for a row count 1..sizeof...(Rs) known only at run
// time: the partial last panel of a tiled loop, whose tile height is a template argument.
template <int... Rs, class F>
void with_rows(int64_t rows, std::integer_sequence<int, Rs...>, F&& f) {
  ((rows == Rs + 1 ? f(std::integral_constant<int, Rs + 1>{}) : void()), ...);
}

void scalar_gemm(int64_t M, int64_t N, int64_t K, float alpha, const float* a, int64_t a_rs,
                 int64_t a_cs, const float* b, int64_t ldb, bool accumulate, float* c,
                 int64_t ldc) {
  for (int64_t i = 0; i < M; ++i) {
    float* c_row = c + i * ldc;
    if (!accumulate) std::fill(c_row, c_row + N, 0.0f);
    for (int64_t k = 0; k < K; ++k) {
      const float aik = alpha * a[i * a_rs + k * a_cs];
      const float* b_row = b + k * ldb;
      for (int64_t j = 0; j < N; ++j) c_row[j] += aik * b_row[j];
    }
  }
}

#ifdef BRAID_HAVE_AVX2_PATH
#define BRAID_AVX2 __attribute__((target("avx2,fma")))

constexpr int kMr = 6;   // tile rows: 6 x 2 accumulators + 2 B vectors + 1 broadcast <= 16 ymm
constexpr int kNr = 16;  // tile columns: two ymm

// Lane mask for the first `n` (0..8) of 8 columns.
BRAID_AVX2 inline __m256i lane_mask(int64_t n) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), idx);
}

// C row r of a tile: alpha * (v0, v1), plus the old value when accumulating; masked when the
// tile is narrower than 16 columns.
template <bool Full>
BRAID_AVX2 inline void store_row(float* c_row, __m256 v0, __m256 v1, __m256 alpha, bool accumulate,
                                 __m256i m0, __m256i m1) {
  v0 = _mm256_mul_ps(v0, alpha);
  v1 = _mm256_mul_ps(v1, alpha);
  if constexpr (Full) {
    if (accumulate) {
      v0 = _mm256_add_ps(v0, _mm256_loadu_ps(c_row));
      v1 = _mm256_add_ps(v1, _mm256_loadu_ps(c_row + 8));
    }
    _mm256_storeu_ps(c_row, v0);
    _mm256_storeu_ps(c_row + 8, v1);
  } else {
    if (accumulate) {
      v0 = _mm256_add_ps(v0, _mm256_maskload_ps(c_row, m0));
      v1 = _mm256_add_ps(v1, _mm256_maskload_ps(c_row + 8, m1));
    }
    _mm256_maskstore_ps(c_row, m0, v0);
    _mm256_maskstore_ps(c_row + 8, m1, v1);
  }
}

// One MR x 16 tile of C; Full means all 16 columns exist, otherwise `n` (< 16) of them.
// The accumulators are named variables, not an array: GCC kept an array on the stack and
// stored it every iteration, which halved the FMA rate.
template <int MR, bool Full>
BRAID_AVX2 void tile(int64_t n, int64_t K, float alpha, const float* a, int64_t a_rs, int64_t a_cs,
                     const float* b, int64_t ldb, bool accumulate, float* c, int64_t ldc) {
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  const __m256i m0 = Full ? _mm256_set1_epi32(-1) : lane_mask(std::min<int64_t>(n, 8));
  const __m256i m1 = Full ? _mm256_set1_epi32(-1) : lane_mask(std::max<int64_t>(n - 8, 0));
  for (int64_t k = 0; k < K; ++k) {
    const float* b_row = b + k * ldb;
    __m256 b0, b1;
    if constexpr (Full) {
      b0 = _mm256_loadu_ps(b_row);
      b1 = _mm256_loadu_ps(b_row + 8);
    } else {
      b0 = _mm256_maskload_ps(b_row, m0);
      b1 = _mm256_maskload_ps(b_row + 8, m1);
    }
    const float* a_col = a + k * a_cs;
#define BRAID_TILE_ROW(r)                                    \
  if constexpr (MR > r) {                                    \
    const __m256 ar = _mm256_broadcast_ss(a_col + r * a_rs); \
    c##r##0 = _mm256_fmadd_ps(ar, b0, c##r##0);              \
    c##r##1 = _mm256_fmadd_ps(ar, b1, c##r##1);              \
  }
    BRAID_TILE_ROW(0)
    BRAID_TILE_ROW(1)
    BRAID_TILE_ROW(2)
    BRAID_TILE_ROW(3)
    BRAID_TILE_ROW(4)
    BRAID_TILE_ROW(5)
#undef BRAID_TILE_ROW
  }
  const __m256 va = _mm256_set1_ps(alpha);
  store_row<Full>(c, c00, c01, va, accumulate, m0, m1);
  if constexpr (MR > 1) store_row<Full>(c + 1 * ldc, c10, c11, va, accumulate, m0, m1);
  if constexpr (MR > 2) store_row<Full>(c + 2 * ldc, c20, c21, va, accumulate, m0, m1);
  if constexpr (MR > 3) store_row<Full>(c + 3 * ldc, c30, c31, va, accumulate, m0, m1);
  if constexpr (MR > 4) store_row<Full>(c + 4 * ldc, c40, c41, va, accumulate, m0, m1);
  if constexpr (MR > 5) store_row<Full>(c + 5 * ldc, c50, c51, va, accumulate, m0, m1);
}

template <int MR>
BRAID_AVX2 void row_panel(int64_t N, int64_t K, float alpha, const float* a, int64_t a_rs,
                          int64_t a_cs, const float* b, int64_t ldb, bool accumulate, float* c,
                          int64_t ldc) {
  int64_t j = 0;
  for (; j + kNr <= N; j += kNr)
    tile<MR, true>(kNr, K, alpha, a, a_rs, a_cs, b + j, ldb, accumulate, c + j, ldc);
  if (j < N) tile<MR, false>(N - j, K, alpha, a, a_rs, a_cs, b + j, ldb, accumulate, c + j, ldc);
}

BRAID_AVX2 void avx2_gemm(int64_t M, int64_t N, int64_t K, float alpha, const float* a,
                          int64_t a_rs, int64_t a_cs, const float* b, int64_t ldb, bool accumulate,
                          float* c, int64_t ldc) {
  // Row panels outer: the A panel (6 rows) stays in L1 while B streams from L1/L2; the
  // attention blocks keep B (K x N) small enough for L2.
  int64_t i = 0;
  for (; i + kMr <= M; i += kMr)
    row_panel<kMr>(N, K, alpha, a + i * a_rs, a_rs, a_cs, b, ldb, accumulate, c + i * ldc, ldc);
  const float* a_i = a + i * a_rs;
  float* c_i = c + i * ldc;
  with_rows(M - i, std::make_integer_sequence<int, kMr - 1>{}, [&](auto r) {
    row_panel<decltype(r)::value>(N, K, alpha, a_i, a_rs, a_cs, b, ldb, accumulate, c_i, ldc);
  });
}

#undef BRAID_AVX2

// ---- f32 on AVX-512 (Avx512 level and up): the same tile arithmetic on zmm ----
//
// 12 rows x 32 columns per tile (24 accumulators + 2 B vectors + 1 broadcast <= 32 zmm): each
// C element is the same FMA chain over k as the AVX2 tile's, then alpha, then the old value,
// so both give the same bits. Column tails are masked.

#define BRAID_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma")))

// The lanes of a 16-column half that hold the first n columns (n may be <= 0 or > 16).
inline __mmask16 column_mask(int64_t n) {
  return n >= 16 ? __mmask16(0xffff) : n > 0 ? __mmask16((1u << n) - 1) : __mmask16(0);
}

// A tile's Mr rows of C: alpha * the accumulators (columns 0-15 and, with Two, 16-31), plus the
// old values when accumulating, masked to the tile's columns. Shared by the f32 and bf16 tiles.
template <int Mr, bool Two>
__attribute__((target("avx512f,avx512bw,avx512vl"))) inline void store_tile512(
    const __m512* acc0, const __m512* acc1, float alpha, bool accumulate, float* c, int64_t ldc,
    __mmask16 m0, __mmask16 m1) {
  const __m512 va = _mm512_set1_ps(alpha);
#pragma GCC unroll 12
  for (int r = 0; r < Mr; ++r) {
    float* cr = c + r * ldc;
    __m512 v0 = _mm512_mul_ps(acc0[r], va);
    if (accumulate) v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(m0, cr));
    _mm512_mask_storeu_ps(cr, m0, v0);
    if constexpr (Two) {
      __m512 v1 = _mm512_mul_ps(acc1[r], va);
      if (accumulate) v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(m1, cr + 16));
      _mm512_mask_storeu_ps(cr + 16, m1, v1);
    }
  }
}

constexpr int kMr512 = 12;

template <int Mr, bool Two>
BRAID_AVX512 void f32_tile512(int64_t K, float alpha, const float* a, int64_t a_rs, int64_t a_cs,
                              const float* b, int64_t ldb, bool accumulate, float* c, int64_t ldc,
                              __mmask16 m0, __mmask16 m1) {
  __m512 acc0[Mr], acc1[Mr];
#pragma GCC unroll 12
  for (int r = 0; r < Mr; ++r) acc0[r] = acc1[r] = _mm512_setzero_ps();
  for (int64_t k = 0; k < K; ++k) {
    const float* b_row = b + k * ldb;
    const __m512 b0 = _mm512_maskz_loadu_ps(m0, b_row);
    const __m512 b1 = Two ? _mm512_maskz_loadu_ps(m1, b_row + 16) : b0;
    const float* a_col = a + k * a_cs;
#pragma GCC unroll 12
    for (int r = 0; r < Mr; ++r) {
      const __m512 ar = _mm512_set1_ps(a_col[r * a_rs]);
      acc0[r] = _mm512_fmadd_ps(ar, b0, acc0[r]);
      if constexpr (Two) acc1[r] = _mm512_fmadd_ps(ar, b1, acc1[r]);
    }
  }
  store_tile512<Mr, Two>(acc0, acc1, alpha, accumulate, c, ldc, m0, m1);
}

template <int Mr>
BRAID_AVX512 void f32_row_panel512(int64_t N, int64_t K, float alpha, const float* a, int64_t a_rs,
                                   int64_t a_cs, const float* b, int64_t ldb, bool accumulate,
                                   float* c, int64_t ldc) {
  for (int64_t j = 0; j < N; j += 32) {
    const int64_t n = std::min<int64_t>(32, N - j);
    const __mmask16 m0 = column_mask(n), m1 = column_mask(n - 16);
    if (n > 16)
      f32_tile512<Mr, true>(K, alpha, a, a_rs, a_cs, b + j, ldb, accumulate, c + j, ldc, m0, m1);
    else
      f32_tile512<Mr, false>(K, alpha, a, a_rs, a_cs, b + j, ldb, accumulate, c + j, ldc, m0, m1);
  }
}

BRAID_AVX512 void avx512_gemm(int64_t M, int64_t N, int64_t K, float alpha, const float* a,
                              int64_t a_rs, int64_t a_cs, const float* b, int64_t ldb,
                              bool accumulate, float* c, int64_t ldc) {
  int64_t i = 0;
  for (; i + kMr512 <= M; i += kMr512)
    f32_row_panel512<kMr512>(N, K, alpha, a + i * a_rs, a_rs, a_cs, b, ldb, accumulate, c + i * ldc,
                             ldc);
  const float* a_i = a + i * a_rs;
  float* c_i = c + i * ldc;
  with_rows(M - i, std::make_integer_sequence<int, kMr512 - 1>{}, [&](auto r) {
    f32_row_panel512<decltype(r)::value>(N, K, alpha, a_i, a_rs, a_cs, b, ldb, accumulate, c_i,
                                         ldc);
  });
}

#undef BRAID_AVX512
#endif

// Kept scalar: it is the order reference of the vector tile, and GCC 12 at -O3 vectorised the
// two-add reduction chain wrongly (wrong sums), so no auto-vectorisation here.
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("no-tree-vectorize")))
#endif
void scalar_gemm_bf16_pairs(int64_t M, int64_t N, int64_t P, float alpha, const bf16* a,
                            int64_t lda, const bf16* b, int64_t ldb, bool accumulate, float* c,
                            int64_t ldc) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      float acc = 0.0f;
      for (int64_t p = 0; p < P; ++p) {
        const bf16* ap = a + i * lda + 2 * p;
        const bf16* bp = b + p * ldb + 2 * j;
        acc += bf16_to_float(ap[1]) * bf16_to_float(bp[1]);
        acc += bf16_to_float(ap[0]) * bf16_to_float(bp[0]);
      }
      float& out = c[i * ldc + j];
      out = accumulate ? out + alpha * acc : alpha * acc;
    }
}

#ifdef BRAID_HAVE_AVX2_PATH
#define BRAID_AVX512BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

constexpr int kMr16 = 8;  // tile rows: 8 x 2 accumulators + 2 B vectors + 1 broadcast <= 32 zmm

// One tile of Mr rows and up to 32 columns (Two: a second accumulator column of 16; masks m0,
// m1 for columns 0-15 and 16-31). No branches in the inner loop, so the 2 Mr accumulators stay
// in registers.
template <int Mr, bool Two>
BRAID_AVX512BF16 void bf16_tile(int64_t P, float alpha, const uint32_t* a, int64_t lda32,
                                const uint32_t* b, int64_t ldb32, bool accumulate, float* c,
                                int64_t ldc, __mmask16 m0, __mmask16 m1) {
  __m512 acc0[Mr], acc1[Mr];
#pragma GCC unroll 8
  for (int r = 0; r < Mr; ++r) acc0[r] = acc1[r] = _mm512_setzero_ps();
  for (int64_t p = 0; p < P; ++p) {
    const uint32_t* bp = b + p * ldb32;
    const __m512bh b0 = (__m512bh)_mm512_maskz_loadu_epi32(m0, bp);
    const __m512bh b1 = Two ? (__m512bh)_mm512_maskz_loadu_epi32(m1, bp + 16) : b0;
#pragma GCC unroll 8
    for (int r = 0; r < Mr; ++r) {
      const __m512bh av = (__m512bh)_mm512_set1_epi32(static_cast<int>(a[r * lda32 + p]));
      acc0[r] = _mm512_dpbf16_ps(acc0[r], av, b0);
      if constexpr (Two) acc1[r] = _mm512_dpbf16_ps(acc1[r], av, b1);
    }
  }
  store_tile512<Mr, Two>(acc0, acc1, alpha, accumulate, c, ldc, m0, m1);
}

template <int Mr>
BRAID_AVX512BF16 void bf16_row_panel(int64_t N, int64_t P, float alpha, const uint32_t* a,
                                     int64_t lda32, const uint32_t* b, int64_t ldb32,
                                     bool accumulate, float* c, int64_t ldc) {
  for (int64_t j = 0; j < N; j += 32) {
    const int64_t n = std::min<int64_t>(32, N - j);
    const __mmask16 m0 = column_mask(n), m1 = column_mask(n - 16);
    if (n > 16)
      bf16_tile<Mr, true>(P, alpha, a, lda32, b + j, ldb32, accumulate, c + j, ldc, m0, m1);
    else
      bf16_tile<Mr, false>(P, alpha, a, lda32, b + j, ldb32, accumulate, c + j, ldc, m0, m1);
  }
}

BRAID_AVX512BF16 void avx512bf16_gemm_pairs(int64_t M, int64_t N, int64_t P, float alpha,
                                            const bf16* a, int64_t lda, const bf16* b, int64_t ldb,
                                            bool accumulate, float* c, int64_t ldc) {
  const uint32_t* a32 = reinterpret_cast<const uint32_t*>(a);
  const uint32_t* b32 = reinterpret_cast<const uint32_t*>(b);
  const int64_t lda32 = lda / 2, ldb32 = ldb / 2;
  int64_t i = 0;
  for (; i + kMr16 <= M; i += kMr16)
    bf16_row_panel<kMr16>(N, P, alpha, a32 + i * lda32, lda32, b32, ldb32, accumulate, c + i * ldc,
                          ldc);
  const uint32_t* a_i = a32 + i * lda32;
  float* c_i = c + i * ldc;
  with_rows(M - i, std::make_integer_sequence<int, kMr16 - 1>{}, [&](auto r) {
    bf16_row_panel<decltype(r)::value>(N, P, alpha, a_i, lda32, b32, ldb32, accumulate, c_i, ldc);
  });
}

#undef BRAID_AVX512BF16

// ---- AMX: the same pair product on the tile unit (Amx level) ----
//
// TDPBF16PS reads exactly the pair layout above: an A tile is 16 rows of 16 pairs (64 bytes),
// a B tile 16 pair-rows of 16 columns, a C tile 16 x 16 f32. One call saves the thread's tile
// configuration, loads its own (the OS granted the tile data when the Amx level was detected),
// runs 16-row x 32-column blocks over steps of 16 pairs, and restores the saved configuration:
// oneDNN can configure its tiles lazily (skipping the load when its per-thread record says its
// own configuration is still there), so this kernel leaves the tile state as it found it. Edge
// tiles (rows, columns or pairs short of 16) are staged through zero-filled buffers, so no
// load reads past an operand.

#define BRAID_AMX __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl")))

struct alignas(64) AmxTileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// This thread's tiles hold the kernel's configuration for the life of an AmxTileScope.
thread_local bool t_amx_configured = false;

BRAID_AMX void amx_configure(AmxTileConfig* saved) {
  _tile_storeconfig(saved);
  AmxTileConfig cfg;
  for (int t = 0; t < 5; ++t) {
    cfg.rows[t] = 16;
    cfg.colsb[t] = 64;
  }
  // GCC 12 does not see that LDTILECFG reads the record and drops the stores above without
  // this barrier (the tiles then stay unconfigured and the first tile instruction faults).
  asm volatile("" : : "r"(&cfg) : "memory");
  _tile_loadconfig(&cfg);
}

BRAID_AMX void amx_restore(const AmxTileConfig& saved) {
  if (saved.palette != 0)
    _tile_loadconfig(&saved);
  else
    _tile_release();
}

// Tiles: 0 and 1 accumulate columns [j, j + 16) and [j + 16, j + 32); 2 holds A; 3 and 4 B.
// A whole 16 x 16 block of C with alpha 1 goes straight between memory and its accumulator
// (loaded when accumulating, so C is added first: within f32 rounding, in the unit's order);
// edge blocks and other alphas pass through a buffer.
BRAID_AMX void amx_gemm_pairs(int64_t M, int64_t N, int64_t P, float alpha, const bf16* a,
                              int64_t lda, const bf16* b, int64_t ldb, bool accumulate, float* c,
                              int64_t ldc) {
  // Without a scope, the configuration found here is put back at the end (see above).
  const bool own_config = !t_amx_configured;
  AmxTileConfig saved;
  if (own_config) amx_configure(&saved);
  alignas(64) bf16 abuf[16 * 32];
  alignas(64) bf16 bbuf[2][16 * 32];
  alignas(64) float cbuf[2][16 * 16];
  const __m512 va = _mm512_set1_ps(alpha);
  const int64_t ldc_bytes = ldc * static_cast<int64_t>(sizeof(float));
  for (int64_t i = 0; i < M; i += 16) {
    const int64_t m = std::min<int64_t>(16, M - i);
    for (int64_t j = 0; j < N; j += 32) {
      const int64_t n = std::min<int64_t>(32, N - j);
      float* c0 = c + i * ldc + j;
      // Whether each column half is a whole block that moves directly.
      const bool direct0 = alpha == 1.0f && m == 16 && n >= 16;
      const bool direct1 = alpha == 1.0f && m == 16 && n == 32;
      if (direct0 && accumulate)
        _tile_loadd(0, c0, ldc_bytes);
      else
        _tile_zero(0);
      if (direct1 && accumulate)
        _tile_loadd(1, c0 + 16, ldc_bytes);
      else
        _tile_zero(1);
      for (int64_t p0 = 0; p0 < P; p0 += 16) {
        const int64_t pk = std::min<int64_t>(16, P - p0);
        const bf16* a_t = a + i * lda + 2 * p0;
        if (m == 16 && pk == 16) {
          _tile_loadd(2, a_t, lda * 2);
        } else {
          std::memset(abuf, 0, sizeof(abuf));
          for (int64_t r = 0; r < m; ++r)
            std::memcpy(abuf + r * 32, a_t + r * lda, sizeof(bf16) * 2 * pk);
          _tile_loadd(2, abuf, 64);
        }
        // B's two column halves: direct when whole, else staged with zeros past the edges.
        for (int h = 0; h < 2; ++h) {
          const int64_t cols = std::min<int64_t>(16, n - 16 * h);
          if (cols <= 0) break;
          const bf16* b_t = b + p0 * ldb + 2 * (j + 16 * h);
          if (cols == 16 && pk == 16) {
            if (h == 0)
              _tile_loadd(3, b_t, ldb * 2);
            else
              _tile_loadd(4, b_t, ldb * 2);
          } else {
            std::memset(bbuf[h], 0, sizeof(bbuf[h]));
            for (int64_t q = 0; q < pk; ++q)
              std::memcpy(bbuf[h] + q * 32, b_t + q * ldb, sizeof(bf16) * 2 * cols);
            if (h == 0)
              _tile_loadd(3, bbuf[0], 64);
            else
              _tile_loadd(4, bbuf[1], 64);
          }
        }
        _tile_dpbf16ps(0, 2, 3);
        if (n > 16) _tile_dpbf16ps(1, 2, 4);
      }
      if (direct0)
        _tile_stored(0, c0, ldc_bytes);
      else
        _tile_stored(0, cbuf[0], 64);
      if (direct1)
        _tile_stored(1, c0 + 16, ldc_bytes);
      else if (n > 16)
        _tile_stored(1, cbuf[1], 64);
      for (int h = 0; h < 2; ++h) {
        const int64_t cols = std::min<int64_t>(16, n - 16 * h);
        if (cols <= 0) break;
        if (h == 0 ? direct0 : direct1) continue;
        const __mmask16 mask = column_mask(cols);
        for (int64_t r = 0; r < m; ++r) {
          float* cr = c0 + r * ldc + 16 * h;
          __m512 v = _mm512_mul_ps(_mm512_load_ps(cbuf[h] + r * 16), va);
          if (accumulate) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, cr));
          _mm512_mask_storeu_ps(cr, mask, v);
        }
      }
    }
  }
  if (own_config) amx_restore(saved);
}

#undef BRAID_AMX
#endif

}  // namespace

#ifdef BRAID_HAVE_AVX2_PATH
struct AmxTileScope::Saved {
  AmxTileConfig config;
};

AmxTileScope::AmxTileScope(CpuIsa isa) {
  if (isa < CpuIsa::Amx || t_amx_configured) return;
  saved_ = std::make_unique<Saved>();
  amx_configure(&saved_->config);
  t_amx_configured = true;
}

AmxTileScope::~AmxTileScope() {
  if (!saved_) return;
  t_amx_configured = false;
  amx_restore(saved_->config);
}
#else
struct AmxTileScope::Saved {};
AmxTileScope::AmxTileScope(CpuIsa) {}
AmxTileScope::~AmxTileScope() = default;
#endif

void small_gemm_bf16_pairs(CpuIsa isa, int64_t M, int64_t N, int64_t P, float alpha, const bf16* a,
                           int64_t lda, const bf16* b, int64_t ldb, bool accumulate, float* c,
                           int64_t ldc) {
  if (M <= 0 || N <= 0) return;
#ifdef BRAID_HAVE_AVX2_PATH
  if (isa >= CpuIsa::Amx)  // cpu_isa_detected() has requested the tiles from the OS
    return amx_gemm_pairs(M, N, P, alpha, a, lda, b, ldb, accumulate, c, ldc);
  if (isa >= CpuIsa::Avx512Bf16)
    return avx512bf16_gemm_pairs(M, N, P, alpha, a, lda, b, ldb, accumulate, c, ldc);
#else
  (void)isa;
#endif
  scalar_gemm_bf16_pairs(M, N, P, alpha, a, lda, b, ldb, accumulate, c, ldc);
}

void small_gemm(CpuIsa isa, int64_t M, int64_t N, int64_t K, float alpha, const float* a,
                int64_t a_row_stride, int64_t a_col_stride, const float* b, int64_t ldb,
                bool accumulate, float* c, int64_t ldc) {
  if (M <= 0 || N <= 0) return;
#ifdef BRAID_HAVE_AVX2_PATH
  if (isa >= CpuIsa::Avx512)
    return avx512_gemm(M, N, K, alpha, a, a_row_stride, a_col_stride, b, ldb, accumulate, c, ldc);
  if (isa >= CpuIsa::Avx2)
    return avx2_gemm(M, N, K, alpha, a, a_row_stride, a_col_stride, b, ldb, accumulate, c, ldc);
#else
  (void)isa;
#endif
  scalar_gemm(M, N, K, alpha, a, a_row_stride, a_col_stride, b, ldb, accumulate, c, ldc);
}

}  // namespace braid::cpu
