// CPU causal attention with grouped-query heads: forward and flash-style backward.
//
// Work is split over (batch, head) pairs; inside a pair, query rows are processed in blocks
// whose score block (rows x visible keys) lives in a per-thread scratch buffer. The block
// products use cpu::small_gemm (single-threaded register-tiled), because oneDNN's sgemm ran
// these small shapes at well under half its large-GEMM rate.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>

#include "core/kernels/cpu/convert.h"
#include "core/kernels/cpu/cpu_kernels.h"
#include "core/kernels/cpu/lowp.h"
#include "core/kernels/cpu/small_gemm.h"
#include "core/kernels/cpu/transpose.h"
#include "core/kernels/cpu/vec_math.h"
#include "core/profile.h"

namespace braid {

namespace {

// Query rows per block: large enough for efficient GEMMs, small enough that the masked part
// of the diagonal block (about half of it) wastes little work.
constexpr int64_t kQueryBlock = 64;

// Where one operand's heads lie in its tensor: element (b, t, h, d) at
// base + (b * T + t) * tok + h * D + d, T its Tq or Tk. Separate tensors: base 0, tok H * D;
// GPT-2's fused projection (q, k and v heads side by side in each row): bases 0, C and 2C,
// tok 3C.
struct HeadLayout {
  int64_t base = 0, tok = 0;
};

struct AttnDims {
  int64_t B = 0, Tq = 0, Tk = 0, Hq = 0, Hkv = 0, D = 0;
  // q, out, dout, dq have Tq rows and Hq heads; k, v, dk, dv Tk rows and Hkv heads.
  HeadLayout q, k, v, out, dout, dq, dk, dv;
  int64_t offset() const { return Tk - Tq; }  // absolute position of query row 0
  int64_t group() const { return Hq / Hkv; }
  // Element offset of head h of batch row b's first row under layout l (query side when
  // l has Tq rows: q, out, dout, dq).
  int64_t q_at(const HeadLayout& l, int64_t b, int64_t h) const {
    return l.base + b * Tq * l.tok + h * D;
  }
  int64_t kv_at(const HeadLayout& l, int64_t b, int64_t h) const {
    return l.base + b * Tk * l.tok + h * D;
  }
  int64_t window = 0;  // 0: every earlier key; else the last `window` keys up to the query
  const int32_t* starts = nullptr;  // (B, Tk): where each position's sample begins, or null
  // The first key visible to the query of batch row b at absolute position pos. Never
  // decreases with pos, so a block's first row has the block's smallest first key.
  int64_t first_key(int64_t b, int64_t pos) const {
    const int64_t w = window > 0 ? std::max<int64_t>(0, pos - window + 1) : 0;
    return starts ? std::max<int64_t>(w, starts[b * Tk + pos]) : w;
  }
};

// q, k, v, out and their gradients: f32, bf16 or f16 (16-bit rows are widened per block
// inside the loops, and results narrowed per block); lse is f32.
void check_input(const Tensor& t, const char* op, const char* name) {
  BRAID_CHECK(t.defined(), "{}: {} is undefined", op, name);
  BRAID_CHECK(t.device().is_cpu(), "{}: {} is on {}, and {} has no CUDA kernel yet", op, name,
              t.device().str(), op);
  cpu::check_float_storage(t, op, name);
}

// An f32 matrix view: element (i, c) at p[i * ld + c].
struct Rows {
  const float* p;
  int64_t ld;
};

// n rows of D values of t, row i starting at element off + i * ld: t's own memory when f32,
// else widened into buf (n x D, packed).
Rows load_rows(const cpu::TileIo& io, const Tensor& t, int64_t off, int64_t n, int64_t D,
               int64_t ld, float* buf) {
  if (t.dtype() == DType::F32) return {t.f32() + off, ld};
  for (int64_t i = 0; i < n; ++i) io.in(t, off + i * ld, D, buf + i * D);
  return {buf, D};
}

// Where n rows of f32 results for t go (as load_rows lays them out); store_rows narrows them.
float* out_rows(Tensor& t, int64_t off, int64_t ld, float* buf, int64_t* out_ld, int64_t D) {
  if (t.dtype() == DType::F32) {
    *out_ld = ld;
    return t.f32() + off;
  }
  *out_ld = D;
  return buf;
}
void store_rows(const cpu::TileIo& io, Tensor& t, int64_t off, int64_t n, int64_t D, int64_t ld,
                const float* res) {
  if (t.dtype() == DType::F32) return;
  for (int64_t i = 0; i < n; ++i) io.store(t, off + i * ld, D, res + i * D);
}

// Software prefetch. Heads are rows of D values strided by kilobytes (B, T, H, D layouts; three
// times wider in GPT-2's packed qkv rows), which the hardware's stride prefetchers do not follow,
// and in training a layer's q, k, v, out and dout come from far caches or memory: a block that
// waits for each of its rows in turn ran a third slower than with warm caches (bench_attention
// --cold). So each query block asks for the rows the next block reads (at a pair's last block
// also the next pair's keys and values) and for the rows it is about to write. Hints only: they
// never fault and change no result.
template <bool Write>
void prefetch_rows(const void* data, int64_t elem_bytes, int64_t off, int64_t n, int64_t D,
                   int64_t ld) {
  const auto* p = static_cast<const char*>(data) + off * elem_bytes;
  const int64_t bytes = D * elem_bytes;
  if (bytes <= 0) return;
  for (int64_t r = 0; r < n; ++r, p += ld * elem_bytes) {
    // Every 64-byte line the row touches, from the one holding its first byte.
    const char* line = p - reinterpret_cast<uintptr_t>(p) % 64;
    for (; line < p + bytes; line += 64) __builtin_prefetch(line, Write ? 1 : 0, 2);
  }
}

int64_t elem_bytes(const Tensor& t) { return static_cast<int64_t>(dtype_size(t.dtype())); }

// A forward task is a (batch, query head) pair: after block i0 of pair `pair` comes block
// i0 + kQueryBlock, else the first block of the next pair, whose keys and values are packed first.
void prefetch_forward_next(const AttnDims& d, int64_t pair, int64_t pairs, int64_t i0,
                           const Tensor& q, const Tensor& k, const Tensor& v) {
  int64_t b = pair / d.Hq, h = pair % d.Hq, next = i0 + kQueryBlock;
  if (next >= d.Tq) {
    if (pair + 1 >= pairs) return;
    b = (pair + 1) / d.Hq;
    h = (pair + 1) % d.Hq;
    next = 0;
    prefetch_rows<false>(k.raw(), elem_bytes(k), d.kv_at(d.k, b, h / d.group()), d.Tk, d.D,
                         d.k.tok);
    prefetch_rows<false>(v.raw(), elem_bytes(v), d.kv_at(d.v, b, h / d.group()), d.Tk, d.D,
                         d.v.tok);
  }
  prefetch_rows<false>(q.raw(), elem_bytes(q), d.q_at(d.q, b, h) + next * d.q.tok,
                       std::min(kQueryBlock, d.Tq - next), d.D, d.q.tok);
}

// A backward task is a (batch, kv head) pair looping over the query heads that share it: after
// block i0 of head h comes the next block, else head h + 1's first, else the next pair's.
void prefetch_backward_next(const AttnDims& d, int64_t pair, int64_t pairs, int64_t h, int64_t i0,
                            const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                            const Tensor& dout) {
  int64_t b = pair / d.Hkv, next = i0 + kQueryBlock;
  if (next >= d.Tq) {
    next = 0;
    if (++h == (pair % d.Hkv + 1) * d.group()) {
      if (pair + 1 >= pairs) return;
      b = (pair + 1) / d.Hkv;
      const int64_t kvh = (pair + 1) % d.Hkv;
      h = kvh * d.group();
      prefetch_rows<false>(k.raw(), elem_bytes(k), d.kv_at(d.k, b, kvh), d.Tk, d.D, d.k.tok);
      prefetch_rows<false>(v.raw(), elem_bytes(v), d.kv_at(d.v, b, kvh), d.Tk, d.D, d.v.tok);
    }
  }
  const int64_t n = std::min(kQueryBlock, d.Tq - next);
  prefetch_rows<false>(q.raw(), elem_bytes(q), d.q_at(d.q, b, h) + next * d.q.tok, n, d.D, d.q.tok);
  prefetch_rows<false>(out.raw(), elem_bytes(out), d.q_at(d.out, b, h) + next * d.out.tok, n, d.D,
                       d.out.tok);
  prefetch_rows<false>(dout.raw(), elem_bytes(dout), d.q_at(d.dout, b, h) + next * d.dout.tok, n,
                       d.D, d.dout.tok);
}

// sample_starts (B, Tk) i32 must describe contiguous samples: s[p] == p or s[p] == s[p - 1].
const int32_t* check_sample_starts(const char* op, const Tensor& s, int64_t B, int64_t Tk) {
  if (!s.defined()) return nullptr;
  BRAID_CHECK(s.device().is_cpu(), "{}: sample_starts is on {}; expected the host", op,
              s.device().str());
  check_dtype(s, DType::I32, "sample_starts");
  check_shape(s, {B, Tk}, "sample_starts");
  const int32_t* p = s.i32();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < Tk; ++t) {
      const int32_t v = p[b * Tk + t];
      BRAID_CHECK(v == t || (t > 0 && v == p[b * Tk + t - 1]),
                  "{}: sample_starts[{}, {}] is {}; expected {} (a new sample) or the previous "
                  "position's start",
                  op, b, t, v, t);
    }
  return p;
}

AttnDims check_qkv(const char* op, const Tensor& q, const Tensor& k, const Tensor& v,
                   int64_t window, const Tensor& sample_starts) {
  check_input(q, op, "q");
  check_input(k, op, "k");
  check_input(v, op, "v");
  BRAID_CHECK(q.ndim() == 4 && k.ndim() == 4, "{}: q {} and k {} must be (B, T, H, D)", op,
              shape_str(q.shape()), shape_str(k.shape()));
  AttnDims d;
  d.B = q.dim(0);
  d.Tq = q.dim(1);
  d.Tk = k.dim(1);
  d.Hq = q.dim(2);
  d.Hkv = k.dim(2);
  d.D = q.dim(3);
  BRAID_CHECK(k.dim(0) == d.B && k.dim(3) == d.D, "{}: k {} does not match q {}", op,
              shape_str(k.shape()), shape_str(q.shape()));
  check_shape(v, k.shape(), "v");
  BRAID_CHECK(d.Hkv > 0 && d.Hq % d.Hkv == 0,
              "{}: {} query heads are not a multiple of {} kv heads", op, d.Hq, d.Hkv);
  BRAID_CHECK(d.Tq <= d.Tk, "{}: {} query rows but only {} keys", op, d.Tq, d.Tk);
  BRAID_CHECK(window >= 0, "{}: window is {}; expected >= 0", op, window);
  d.window = window;
  d.starts = check_sample_starts(op, sample_starts, d.B, d.Tk);
  d.q = d.out = d.dout = d.dq = HeadLayout{0, d.Hq * d.D};
  d.k = d.v = d.dk = d.dv = HeadLayout{0, d.Hkv * d.D};
  return d;
}

// GPT-2's fused projection: qkv (B, T, 3 * heads * D), each row's q, k and v heads side by side.
AttnDims check_packed(const char* op, const Tensor& qkv, int64_t heads, int64_t window,
                      const Tensor& sample_starts) {
  check_input(qkv, op, "qkv");
  BRAID_CHECK(qkv.ndim() == 3 && qkv.dim(2) % 3 == 0,
              "{}: qkv {} must be (B, T, 3 * heads * head_dim)", op, shape_str(qkv.shape()));
  const int64_t C = qkv.dim(2) / 3;
  BRAID_CHECK(heads > 0 && C % heads == 0 && C > 0,
              "{}: {} heads do not divide the width {} of qkv {}", op, heads, C,
              shape_str(qkv.shape()));
  BRAID_CHECK(window >= 0, "{}: window is {}; expected >= 0", op, window);
  AttnDims d;
  d.B = qkv.dim(0);
  d.Tq = d.Tk = qkv.dim(1);
  d.Hq = d.Hkv = heads;
  d.D = C / heads;
  d.window = window;
  d.starts = check_sample_starts(op, sample_starts, d.B, d.Tk);
  d.q = d.dq = HeadLayout{0, 3 * C};
  d.k = d.dk = HeadLayout{C, 3 * C};
  d.v = d.dv = HeadLayout{2 * C, 3 * C};
  d.out = d.dout = HeadLayout{0, C};
  return d;
}

// kt (D, Tk) <- the transpose of one head's rows of k (row stride ld), so that score GEMMs
// read B contiguously.
void transpose_head(CpuIsa isa, float* kt, const float* k_head, int64_t Tk, int64_t D, int64_t ld) {
  cpu::transpose_u32(isa, reinterpret_cast<uint32_t*>(kt), Tk,
                     reinterpret_cast<const uint32_t*>(k_head), ld, Tk, D);
}

// The forward's softmax of one query block's scores s (rows, nk - lo; column c is key lo + c):
// each row becomes its probabilities over its visible keys (keys before the window or the
// sample are scored but given probability zero), its log-sum-exp goes to lse_bh.
void softmax_block(CpuIsa isa, const AttnDims& d, int64_t b, int64_t i0, int64_t rows, int64_t lo,
                   float* s, float* lse_bh) {
  const int64_t nk = d.offset() + i0 + rows, nc = nk - lo;
  for (int64_t r = 0; r < rows; ++r) {
    float* row = s + r * nc;
    const int64_t visible = d.offset() + i0 + r + 1;
    const int64_t first = d.first_key(b, visible - 1);
    lse_bh[i0 + r] = cpu::softmax_row(isa, row + first - lo, visible - first, 1.0f);
    std::memset(row, 0, sizeof(float) * static_cast<size_t>(first - lo));
    std::memset(row + visible - lo, 0, sizeof(float) * static_cast<size_t>(nk - visible));
  }
}

// The backward's per-row work of one query block: p (rows, nk - lo) holds the scores and
// becomes the probabilities (from lse_bh), ds holds dp = dout . v and becomes the score
// gradients; dot(r) is dout . out of row r (equal to sum_j p_j dp_j, cheaper: D, not nk).
// Columns outside a row's visible keys are zero in both.
template <class Dot>
void softmax_grad_block(CpuIsa isa, const AttnDims& d, int64_t b, int64_t i0, int64_t rows,
                        int64_t lo, float scale, const float* lse_bh, float* p, float* ds,
                        Dot dot) {
  const int64_t nk = d.offset() + i0 + rows, nc = nk - lo;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t visible = d.offset() + i0 + r + 1;
    const int64_t first = d.first_key(b, visible - 1);
    const size_t masked = static_cast<size_t>(nk - visible);
    const size_t before = static_cast<size_t>(first - lo);
    float* p_row = p + r * nc;
    float* ds_row = ds + r * nc;
    const int64_t f = first - lo, e = visible - lo;  // columns of first and visible
    cpu::exp_shifted_row(isa, p_row + f, visible - first, lse_bh[i0 + r]);
    std::memset(p_row, 0, sizeof(float) * before);
    std::memset(p_row + e, 0, sizeof(float) * masked);
    cpu::softmax_grad_row(isa, ds_row + f, p_row + f, visible - first, dot(r), scale);
    std::memset(ds_row, 0, sizeof(float) * before);
    std::memset(ds_row + e, 0, sizeof(float) * masked);
  }
}

// The causal products of one query block. Query row r of the block sits at absolute position
// base + r and sees keys [0, base + r]; the helpers work in panels of panel32(isa) rows (or keys),
// small_gemm's tile height, and skip the keys no row of a panel can see, so the masked half
// of the diagonal costs almost nothing.
int64_t panel32(CpuIsa isa) { return isa >= CpuIsa::Avx512 ? 12 : 6; }  // AVX-512 / AVX2 tiles

// s (rows, *) = alpha * a (rows, D) @ bt (D, *), each panel only up to its visible keys.
void causal_scores(CpuIsa isa, int64_t rows, int64_t base, int64_t D, float alpha, const float* a,
                   int64_t lda, const float* bt, int64_t ldbt, float* s, int64_t lds) {
  const int64_t panel = panel32(isa);
  for (int64_t r0 = 0; r0 < rows; r0 += panel) {
    const int64_t pr = std::min(panel, rows - r0);
    cpu::small_gemm(isa, pr, base + r0 + pr, D, alpha, a + r0 * lda, lda, 1, bt, ldbt, false,
                    s + r0 * lds, lds);
  }
}

// c (rows, D) = p (rows, *) @ x (*, D), each panel summing only over its visible keys.
void causal_rows_product(CpuIsa isa, int64_t rows, int64_t base, int64_t D, const float* p,
                         int64_t ldp, const float* x, int64_t ldx, float* c, int64_t ldc) {
  const int64_t panel = panel32(isa);
  for (int64_t r0 = 0; r0 < rows; r0 += panel) {
    const int64_t pr = std::min(panel, rows - r0);
    cpu::small_gemm(isa, pr, D, base + r0 + pr, 1.0f, p + r0 * ldp, ldp, 1, x, ldx, false,
                    c + r0 * ldc, ldc);
  }
}

// c (base + rows, D) += p^T @ x (rows, D), each key panel summing only over the rows that see
// it. p must be zero past each row's visible keys.
void causal_keys_accumulate(CpuIsa isa, int64_t rows, int64_t base, int64_t D, const float* p,
                            int64_t ldp, const float* x, int64_t ldx, float* c, int64_t ldc) {
  const int64_t nk = base + rows;
  const int64_t panel = panel32(isa);
  for (int64_t j0 = 0; j0 < nk; j0 += panel) {
    const int64_t pj = std::min(panel, nk - j0);
    const int64_t first_row = std::max<int64_t>(0, j0 - base);
    cpu::small_gemm(isa, pj, D, rows - first_row, 1.0f, p + first_row * ldp + j0, 1, ldp,
                    x + first_row * ldx, ldx, true, c + j0 * ldc, ldc);
  }
}

// ---- bf16 storage on CPUs with bf16 dot products (Avx512Bf16 and up) ----
//
// The same blocks and causal skipping as the f32 path, with every product on VDPBF16PS
// (cpu::small_gemm_bf16_pairs): q, k, v and dout are used as the bf16 values they are; the
// probabilities and score gradients (f32, from the f32 softmax) are rounded to bf16 before
// the products that consume them, as flash attention does on GPUs. Accumulators, the softmax,
// lse and dk/dv sums stay f32. Pair layouts (two consecutive values of the inner dimension
// side by side) are packed per head or block; the inner dimensions are padded to even with
// zeros, and the first visible key is rounded down to even (that key is masked: probability 0).

// small_gemm_bf16_pairs' tile height: 8 rows of VDPBF16PS accumulators, 16 on AMX's tiles.
int64_t panel16(CpuIsa isa) { return isa >= CpuIsa::Amx ? 16 : 8; }

int64_t round_even(int64_t n) { return (n + 1) & ~int64_t{1}; }

// dst (D/2 pair-rows, n columns): pair p of column j = (src[j][2p], src[j][2p + 1]), i.e. the
// transpose of src's rows read as 32-bit pairs. src rows have stride ld (bf16 elements).
void pack_pairs_transposed(CpuIsa isa, bf16* dst, const bf16* src, int64_t n, int64_t D,
                           int64_t ld) {
  cpu::transpose_u32(isa, reinterpret_cast<uint32_t*>(dst), n,
                     reinterpret_cast<const uint32_t*>(src), ld / 2, n, D / 2);
}

// dst (ceil(n/2) pair-rows, D columns): pair q of column c = (src[2q][c], src[2q + 1][c]),
// zero past row n - 1. src rows have stride ld.
void pack_pairs_rows(bf16* dst, const bf16* src, int64_t n, int64_t D, int64_t ld) {
  for (int64_t q = 0; 2 * q < n; ++q) {
    const uint16_t* r0 = reinterpret_cast<const uint16_t*>(src + 2 * q * ld);
    uint32_t* out = reinterpret_cast<uint32_t*>(dst + 2 * q * D);
    if (2 * q + 1 < n) {
      const uint16_t* r1 = r0 + ld;
#pragma omp simd
      for (int64_t c = 0; c < D; ++c)
        out[c] = static_cast<uint32_t>(r0[c]) | (static_cast<uint32_t>(r1[c]) << 16);
    } else {
#pragma omp simd
      for (int64_t c = 0; c < D; ++c) out[c] = r0[c];
    }
  }
}

// x (rows, n) f32 (row stride n) -> bf16 row pairs (ceil(rows/2) pair-rows, n columns): pair q
// of column j = (x[2q][j], x[2q + 1][j]), zero past the last row. tmp: 2 n bf16.
void round_row_pairs(cpu::ConvertIsa path, bf16* dst, const float* x, int64_t rows, int64_t n,
                     bf16* tmp) {
  uint32_t* d32 = reinterpret_cast<uint32_t*>(dst);
  const uint16_t* t0 = reinterpret_cast<const uint16_t*>(tmp);
  const uint16_t* t1 = t0 + n;
  for (int64_t q = 0; 2 * q < rows; ++q) {
    cpu::narrow_from_f32(path, DType::BF16, x + 2 * q * n, tmp, n);
    if (2 * q + 1 < rows)
      cpu::narrow_from_f32(path, DType::BF16, x + (2 * q + 1) * n, tmp + n, n);
    else
      std::fill(tmp + n, tmp + 2 * n, bf16{0});
    uint32_t* out = d32 + q * n;
#pragma omp simd
    for (int64_t j = 0; j < n; ++j)
      out[j] = static_cast<uint32_t>(t0[j]) | (static_cast<uint32_t>(t1[j]) << 16);
  }
}

// dst (D, rows_e) = the transpose of `rows` bf16 rows of D values (stride ld), zero-padded to
// rows_e = rows rounded up to even: each row of dst holds pairs along the source rows.
void transpose_rows(CpuIsa isa, bf16* dst, const bf16* src, int64_t rows, int64_t D, int64_t ld) {
  const int64_t rows_e = round_even(rows);
  cpu::transpose_u16(isa, reinterpret_cast<uint16_t*>(dst), rows_e,
                     reinterpret_cast<const uint16_t*>(src), ld, rows, D);
  if (rows_e != rows)
    for (int64_t c = 0; c < D; ++c) dst[c * rows_e + rows] = bf16{0};
}

// x (rows, n) f32 -> bf16 rows of stride n_e = n rounded up to even, the pad column zero.
void round_rows(cpu::ConvertIsa path, bf16* dst, const float* x, int64_t rows, int64_t n) {
  const int64_t n_e = round_even(n);
  for (int64_t r = 0; r < rows; ++r) {
    cpu::narrow_from_f32(path, DType::BF16, x + r * n, dst + r * n_e, n);
    if (n_e != n) dst[r * n_e + n] = bf16{0};
  }
}

// s (rows, *) = alpha * a (rows, D; bf16 rows of stride lda) @ keys in pair layout (column
// c = key lo + c; kt2 already offset to lo, pair-row stride ldb), each panel only up to its
// visible keys (base: keys visible to row 0 minus one, relative to lo).
void causal_scores_bf16(CpuIsa isa, int64_t rows, int64_t base, int64_t D, float alpha,
                        const bf16* a, int64_t lda, const bf16* kt2, int64_t ldb, float* s,
                        int64_t lds) {
  const int64_t panel = panel16(isa);
  for (int64_t r0 = 0; r0 < rows; r0 += panel) {
    const int64_t pr = std::min(panel, rows - r0);
    cpu::small_gemm_bf16_pairs(isa, pr, base + r0 + pr, D / 2, alpha, a + r0 * lda, lda, kt2, ldb,
                               false, s + r0 * lds, lds);
  }
}

// c (rows, D) = p (bf16 rows of stride ldp, pairs along keys) @ x2 (keys in row pairs), each
// panel summing only over its visible keys (rounded up to even).
void causal_rows_product_bf16(CpuIsa isa, int64_t rows, int64_t base, int64_t D, const bf16* p,
                              int64_t ldp, const bf16* x2, float* c, int64_t ldc) {
  const int64_t panel = panel16(isa);
  for (int64_t r0 = 0; r0 < rows; r0 += panel) {
    const int64_t pr = std::min(panel, rows - r0);
    const int64_t keys = round_even(base + r0 + pr);
    cpu::small_gemm_bf16_pairs(isa, pr, D, keys / 2, 1.0f, p + r0 * ldp, ldp, x2, 2 * D, false,
                               c + r0 * ldc, ldc);
  }
}

// ct (D, *) += xt (D, rows_e: the block's rows of x, transposed) @ p2 (the block's rows of p
// in row pairs, nk columns): key column j of ct (relative to lo, row stride ldc) gains
// sum_r x[r] p[r][j]. Each group of 32 keys sums only over the rows that see its first key
// (from that row rounded down to even: earlier rows hold zeros there).
void causal_keys_accumulate_bf16(CpuIsa isa, int64_t rows, int64_t base, int64_t D, const bf16* xt,
                                 const bf16* p2, float* ct, int64_t ldc) {
  const int64_t nk = base + rows, rows_e = round_even(rows);
  constexpr int64_t kKeys = 32;  // the tile width of small_gemm_bf16_pairs
  for (int64_t j0 = 0; j0 < nk; j0 += kKeys) {
    const int64_t n = std::min(kKeys, nk - j0);
    const int64_t first_row = std::max<int64_t>(0, j0 - base) & ~int64_t{1};
    cpu::small_gemm_bf16_pairs(isa, D, n, (rows_e - first_row) / 2, 1.0f, xt + first_row, rows_e,
                               p2 + first_row * nk + 2 * j0, 2 * nk, true, ct + j0, ldc);
  }
}

// Whether the bf16 dot-product path runs: every tensor bf16, the level has bf16 dot products,
// and the head size is even (pairs).
bool bf16_dot_path(const ExecContext& ctx, std::initializer_list<const Tensor*> ts, int64_t D) {
  if (ctx.cpu_isa() < CpuIsa::Avx512Bf16 || D % 2 != 0) return false;
  for (const Tensor* t : ts)
    if (t->dtype() != DType::BF16) return false;
  return true;
}

void attention_forward_bf16(ExecContext& ctx, const AttnDims& d, Tensor& out, Tensor& lse,
                            const Tensor& q, const Tensor& k, const Tensor& v) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(d.D));
  const CpuIsa isa = ctx.cpu_isa();
  const cpu::ConvertIsa path = cpu::convert_path(isa);
  const bf16* qp = q.data<bf16>();  // q, out: (B, Tq, Hq, D); k, v: (B, Tk, Hkv, D)
  const bf16* kp = k.data<bf16>();
  const bf16* vp = v.data<bf16>();
  bf16* op_ = out.data<bf16>();
  float* lsep = lse.f32();  // (B, Hq, Tq)
  const int64_t pairs = d.B * d.Hq, ldq = d.q.tok, ldo = d.out.tok;
  const int64_t tk_e = round_even(d.Tk);
  // Per thread, in floats: scores (block x Tk), the rounded probabilities (block x Tk_e bf16),
  // keys in pairs (D x Tk bf16), values in row pairs (Tk_e x D bf16), an output block.
  const int64_t s_sz = kQueryBlock * d.Tk, pb_sz = kQueryBlock * tk_e / 2, kt_sz = d.D * d.Tk / 2,
                v2_sz = tk_e * d.D / 2, o_sz = kQueryBlock * d.D;
#pragma omp parallel
  {
    Tensor scratch =
        ctx.empty({s_sz + pb_sz + kt_sz + v2_sz + o_sz}, DType::F32, MemCategory::Workspace);
    float* s = scratch.f32();
    bf16* pb = reinterpret_cast<bf16*>(s + s_sz);
    bf16* kt2 = reinterpret_cast<bf16*>(s + s_sz + pb_sz);
    bf16* v2 = reinterpret_cast<bf16*>(s + s_sz + pb_sz + kt_sz);
    float* ob = s + s_sz + pb_sz + kt_sz + v2_sz;
    const cpu::AmxTileScope tiles(isa);
#pragma omp for schedule(static)
    for (int64_t pair = 0; pair < pairs; ++pair) {
      const int64_t b = pair / d.Hq, h = pair % d.Hq, kvh = h / d.group();
      const bf16* q_bh = qp + d.q_at(d.q, b, h);
      bf16* o_bh = op_ + d.q_at(d.out, b, h);
      float* lse_bh = lsep + (b * d.Hq + h) * d.Tq;
      pack_pairs_transposed(isa, kt2, kp + d.kv_at(d.k, b, kvh), d.Tk, d.D, d.k.tok);
      pack_pairs_rows(v2, vp + d.kv_at(d.v, b, kvh), d.Tk, d.D, d.v.tok);
      for (int64_t i0 = 0; i0 < d.Tq; i0 += kQueryBlock) {
        const int64_t rows = std::min(kQueryBlock, d.Tq - i0);
        prefetch_rows<true>(op_, 2, d.q_at(d.out, b, h) + i0 * ldo, rows, d.D, ldo);
        prefetch_forward_next(d, pair, pairs, i0, q, k, v);
        const int64_t nk = d.offset() + i0 + rows, base = d.offset() + i0;
        const int64_t lo = d.first_key(b, base) & ~int64_t{1}, nc = nk - lo;
        causal_scores_bf16(isa, rows, base - lo, d.D, scale, q_bh + i0 * ldq, ldq, kt2 + 2 * lo,
                           2 * d.Tk, s, nc);
        softmax_block(isa, d, b, i0, rows, lo, s, lse_bh);
        round_rows(path, pb, s, rows, nc);
        causal_rows_product_bf16(isa, rows, base - lo, d.D, pb, round_even(nc), v2 + lo * d.D, ob,
                                 d.D);
        for (int64_t r = 0; r < rows; ++r)
          cpu::narrow_from_f32(path, DType::BF16, ob + r * d.D, o_bh + (i0 + r) * ldo, d.D);
      }
    }
  }
}

void attention_backward_bf16(ExecContext& ctx, const AttnDims& d, Tensor& dq, Tensor& dk,
                             Tensor& dv, const Tensor& dout, const Tensor& q, const Tensor& k,
                             const Tensor& v, const Tensor& out, const Tensor& lse) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(d.D));
  const CpuIsa isa = ctx.cpu_isa();
  const cpu::ConvertIsa path = cpu::convert_path(isa);
  const bf16* qp = q.data<bf16>();  // q, out, dout, dq: (B, Tq, Hq, D)
  const bf16* kp = k.data<bf16>();  // k, v, dk, dv: (B, Tk, Hkv, D)
  const bf16* vp = v.data<bf16>();
  const bf16* outp = out.data<bf16>();
  const bf16* doutp = dout.data<bf16>();
  bf16* dqp = dq.data<bf16>();
  bf16* dkp = dk.data<bf16>();
  bf16* dvp = dv.data<bf16>();
  const float* lsep = lse.f32();  // (B, Hq, Tq)
  const int64_t pairs = d.B * d.Hkv;
  const int64_t ldq = d.q.tok, ldo = d.out.tok, lddo = d.dout.tok, lddq = d.dq.tok;
  const int64_t tk_e = round_even(d.Tk), qb_e = round_even(kQueryBlock);
  // Per thread, in floats: p and ds (block x Tk f32); kt2, vt2 (D x Tk bf16), k2 (Tk_e x D
  // bf16); p2, ds2 (block_e x Tk bf16 row pairs), dsb (block x Tk_e bf16); dot and qt (D x
  // block_e bf16); the dq block; dk and dv sums, transposed (D x Tk f32); two rows for
  // dout . out; a conversion row pair.
  const int64_t blk = kQueryBlock * d.Tk, kt_sz = d.D * d.Tk / 2, k2_sz = tk_e * d.D / 2,
                p2_sz = qb_e * d.Tk / 2, dsb_sz = kQueryBlock * tk_e / 2, xt_sz = qb_e * d.D / 2,
                dqb_sz = kQueryBlock * d.D, kv_sz = d.Tk * d.D;
  const int64_t total = 2 * blk + 2 * kt_sz + k2_sz + 2 * p2_sz + dsb_sz + 2 * xt_sz + dqb_sz +
                        2 * kv_sz + 2 * d.D + d.Tk;
#pragma omp parallel
  {
    Tensor scratch = ctx.empty({total}, DType::F32, MemCategory::Workspace);
    float* cur = scratch.f32();
    auto take = [&cur](int64_t n) {
      float* p = cur;
      cur += n;
      return p;
    };
    auto take16 = [&take](int64_t n_floats) { return reinterpret_cast<bf16*>(take(n_floats)); };
    float* p = take(blk);
    float* ds = take(blk);
    bf16* kt2 = take16(kt_sz);
    bf16* vt2 = take16(kt_sz);
    bf16* k2 = take16(k2_sz);
    bf16* p2 = take16(p2_sz);
    bf16* ds2 = take16(p2_sz);
    bf16* dsb = take16(dsb_sz);
    bf16* dot_t = take16(xt_sz);
    bf16* qt = take16(xt_sz);
    float* dqb = take(dqb_sz);
    float* dkt = take(kv_sz);  // (D, Tk)
    float* dvt = take(kv_sz);  // (D, Tk)
    float* do_row = take(d.D);
    float* o_row = take(d.D);
    bf16* tmp = take16(d.Tk);
    const cpu::AmxTileScope tiles(isa);
#pragma omp for schedule(static)
    for (int64_t pair = 0; pair < pairs; ++pair) {
      const int64_t b = pair / d.Hkv, kvh = pair % d.Hkv;
      const bf16* k_h = kp + d.kv_at(d.k, b, kvh);
      pack_pairs_transposed(isa, kt2, k_h, d.Tk, d.D, d.k.tok);
      pack_pairs_transposed(isa, vt2, vp + d.kv_at(d.v, b, kvh), d.Tk, d.D, d.v.tok);
      pack_pairs_rows(k2, k_h, d.Tk, d.D, d.k.tok);
      std::fill(dkt, dkt + kv_sz, 0.0f);
      std::fill(dvt, dvt + kv_sz, 0.0f);
      prefetch_rows<true>(dkp, 2, d.kv_at(d.dk, b, kvh), d.Tk, d.D, d.dk.tok);
      prefetch_rows<true>(dvp, 2, d.kv_at(d.dv, b, kvh), d.Tk, d.D, d.dv.tok);
      for (int64_t h = kvh * d.group(); h < (kvh + 1) * d.group(); ++h) {
        const float* lse_bh = lsep + (b * d.Hq + h) * d.Tq;
        for (int64_t i0 = 0; i0 < d.Tq; i0 += kQueryBlock) {
          const int64_t rows = std::min(kQueryBlock, d.Tq - i0);
          prefetch_rows<true>(dqp, 2, d.q_at(d.dq, b, h) + i0 * lddq, rows, d.D, lddq);
          prefetch_backward_next(d, pair, pairs, h, i0, q, k, v, out, dout);
          const int64_t nk = d.offset() + i0 + rows, base = d.offset() + i0;
          const int64_t lo = d.first_key(b, base) & ~int64_t{1}, nc = nk - lo;
          const bf16* q_blk = qp + d.q_at(d.q, b, h) + i0 * ldq;
          const bf16* o_blk = outp + d.q_at(d.out, b, h) + i0 * ldo;
          const bf16* do_blk = doutp + d.q_at(d.dout, b, h) + i0 * lddo;
          causal_scores_bf16(isa, rows, base - lo, d.D, scale, q_blk, ldq, kt2 + 2 * lo, 2 * d.Tk,
                             p, nc);
          causal_scores_bf16(isa, rows, base - lo, d.D, 1.0f, do_blk, lddo, vt2 + 2 * lo, 2 * d.Tk,
                             ds, nc);
          softmax_grad_block(isa, d, b, i0, rows, lo, scale, lse_bh, p, ds, [&](int64_t r) {
            cpu::widen_to_f32(path, DType::BF16, do_blk + r * lddo, do_row, d.D);
            cpu::widen_to_f32(path, DType::BF16, o_blk + r * ldo, o_row, d.D);
            return cpu::dot_row(isa, do_row, o_row, d.D);
          });
          round_row_pairs(path, p2, p, rows, nc, tmp);
          // ds rounded once; its row pairs are the rounded rows interleaved.
          round_rows(path, dsb, ds, rows, nc);
          pack_pairs_rows(ds2, dsb, rows, nc, round_even(nc));
          transpose_rows(isa, dot_t, do_blk, rows, d.D, lddo);
          transpose_rows(isa, qt, q_blk, rows, d.D, ldq);
          causal_keys_accumulate_bf16(isa, rows, base - lo, d.D, dot_t, p2, dvt + lo, d.Tk);
          causal_rows_product_bf16(isa, rows, base - lo, d.D, dsb, round_even(nc), k2 + lo * d.D,
                                   dqb, d.D);
          for (int64_t r = 0; r < rows; ++r)
            cpu::narrow_from_f32(path, DType::BF16, dqb + r * d.D,
                                 dqp + d.q_at(d.dq, b, h) + (i0 + r) * lddq, d.D);
          causal_keys_accumulate_bf16(isa, rows, base - lo, d.D, qt, ds2, dkt + lo, d.Tk);
        }
      }
      // dk, dv rows from the transposed sums (each row rounded as narrowing it whole would).
      cpu::transpose_f32_to_bf16(path, isa,
                                 reinterpret_cast<uint16_t*>(dkp + d.kv_at(d.dk, b, kvh)), d.dk.tok,
                                 dkt, d.Tk, d.D, d.Tk);
      cpu::transpose_f32_to_bf16(path, isa,
                                 reinterpret_cast<uint16_t*>(dvp + d.kv_at(d.dv, b, kvh)), d.dv.tok,
                                 dvt, d.Tk, d.D, d.Tk);
    }
  }
}

}  // namespace

namespace cpu {

namespace {

void check_out_lse(const char* op, const AttnDims& d, const Tensor& out, const Tensor& lse) {
  check_input(out, op, "out");
  BRAID_CHECK(lse.defined(), "{}: lse is undefined", op);
  check_dtype(lse, DType::F32, "lse");
  check_shape(out, {d.B, d.Tq, d.Hq, d.D}, "out");
  check_shape(lse, {d.B, d.Hq, d.Tq}, "lse");
}

// q, k, v may be one tensor (the packed layout): d's layouts say where each operand lies.
void forward_impl(ExecContext& ctx, const AttnDims& d, Tensor& out, Tensor& lse, const Tensor& q,
                  const Tensor& k, const Tensor& v) {
  if (out.numel() == 0) return;
  if (bf16_dot_path(ctx, {&out, &q, &k, &v}, d.D))
    return attention_forward_bf16(ctx, d, out, lse, q, k, v);

  const float scale = 1.0f / std::sqrt(static_cast<float>(d.D));
  const CpuIsa isa = ctx.cpu_isa();
  // q, out: (B, Tq, Hq, D); k, v: (B, Tk, Hkv, D); lse: (B, Hq, Tq)
  float* lsep = lse.f32();
  const int64_t pairs = d.B * d.Hq;
  const int64_t ldq = d.q.tok, ldo = d.out.tok;
  const cpu::TileIo io(ctx);
  const bool low = cpu::any_low_precision({&out, &q, &k, &v});
  const int64_t qb = kQueryBlock * d.D;  // one block of query (or output) rows, packed

#pragma omp parallel
  {
    // s: (kQueryBlock, Tk) scores, then probabilities, of one query block; kt: (D, Tk); with
    // 16-bit storage also the widened block of q, its output rows, and the head's k and v.
    const int64_t low_size = low ? 2 * qb + 2 * d.Tk * d.D : 0;
    Tensor scratch =
        ctx.empty({(kQueryBlock + d.D) * d.Tk + low_size}, DType::F32, MemCategory::Workspace);
    float* s = scratch.f32();
    float* kt = s + kQueryBlock * d.Tk;
    float* qbuf = kt + d.D * d.Tk;  // the rest only with 16-bit storage
    float* obuf = qbuf + qb;
    float* kbuf = obuf + qb;
    float* vbuf = kbuf + d.Tk * d.D;
#pragma omp for schedule(static)
    for (int64_t pair = 0; pair < pairs; ++pair) {
      const int64_t b = pair / d.Hq, h = pair % d.Hq, kvh = h / d.group();
      const int64_t q_off = d.q_at(d.q, b, h), o_off = d.q_at(d.out, b, h);
      float* lse_bh = lsep + (b * d.Hq + h) * d.Tq;
      const Rows kr = load_rows(io, k, d.kv_at(d.k, b, kvh), d.Tk, d.D, d.k.tok, kbuf);
      const Rows vr = load_rows(io, v, d.kv_at(d.v, b, kvh), d.Tk, d.D, d.v.tok, vbuf);
      transpose_head(isa, kt, kr.p, d.Tk, d.D, kr.ld);
      for (int64_t i0 = 0; i0 < d.Tq; i0 += kQueryBlock) {
        const int64_t rows = std::min(kQueryBlock, d.Tq - i0);
        prefetch_rows<true>(out.raw(), elem_bytes(out), o_off + i0 * ldo, rows, d.D, ldo);
        prefetch_forward_next(d, pair, pairs, i0, q, k, v);
        const int64_t nk = d.offset() + i0 + rows;  // keys visible to the block's last row
        const int64_t base = d.offset() + i0;
        const Rows qr = load_rows(io, q, q_off + i0 * ldq, rows, d.D, ldq, qbuf);
        int64_t ldob = 0;
        float* o_blk = out_rows(out, o_off + i0 * ldo, ldo, obuf, &ldob, d.D);
        // Keys [lo, nk) are scored: none of the block's rows sees a key before lo (its first
        // row's first key), so the products start there. Score column c is key lo + c.
        const int64_t lo = d.first_key(b, base), nc = nk - lo;
        causal_scores(isa, rows, base - lo, d.D, scale, qr.p, qr.ld, kt + lo, d.Tk, s, nc);
        softmax_block(isa, d, b, i0, rows, lo, s, lse_bh);
        causal_rows_product(isa, rows, base - lo, d.D, s, nc, vr.p + lo * vr.ld, vr.ld, o_blk,
                            ldob);
        store_rows(io, out, o_off + i0 * ldo, rows, d.D, ldo, o_blk);
      }
    }
  }
}

// dq, dk, dv may be one tensor, as q, k, v may (the packed layout).
void backward_impl(ExecContext& ctx, const AttnDims& d, Tensor& dq, Tensor& dk, Tensor& dv,
                   const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                   const Tensor& out, const Tensor& lse) {
  if (bf16_dot_path(ctx, {&dq, &dk, &dv, &dout, &q, &k, &v, &out}, d.D))
    return attention_backward_bf16(ctx, d, dq, dk, dv, dout, q, k, v, out, lse);

  const float scale = 1.0f / std::sqrt(static_cast<float>(d.D));
  const CpuIsa isa = ctx.cpu_isa();
  // q, out, dout, dq: (B, Tq, Hq, D); k, v, dk, dv: (B, Tk, Hkv, D); lse: (B, Hq, Tq)
  const float* lsep = lse.f32();
  // One task per (batch, kv head): it owns that slice of dk and dv and loops over the query
  // heads sharing it in a fixed order, so the sums need no atomics and are deterministic.
  const int64_t pairs = d.B * d.Hkv;
  const cpu::TileIo io(ctx);
  const bool low = cpu::any_low_precision({&dq, &dk, &dv, &dout, &q, &k, &v, &out});
  const int64_t qb = kQueryBlock * d.D, kvb = d.Tk * d.D;

#pragma omp parallel
  {
    // p, ds: (kQueryBlock, Tk) recomputed probabilities and score gradients of one block;
    // kt, vt: (D, Tk) transposed keys and values of the kv head; with 16-bit storage also the
    // widened q, out, dout blocks, the dq block, and the head's k, v, dk and dv.
    const int64_t low_size = low ? 4 * qb + 4 * kvb : 0;
    Tensor scratch =
        ctx.empty({2 * (kQueryBlock + d.D) * d.Tk + low_size}, DType::F32, MemCategory::Workspace);
    float* p = scratch.f32();
    float* ds = p + kQueryBlock * d.Tk;
    float* kt = ds + kQueryBlock * d.Tk;
    float* vt = kt + d.D * d.Tk;
    float* qbuf = vt + d.D * d.Tk;  // the rest only with 16-bit storage
    float* obuf = qbuf + qb;
    float* dobuf = obuf + qb;
    float* dqbuf = dobuf + qb;
    float* kbuf = dqbuf + qb;
    float* vbuf = kbuf + kvb;
    float* dkbuf = vbuf + kvb;
    float* dvbuf = dkbuf + kvb;
#pragma omp for schedule(static)
    for (int64_t pair = 0; pair < pairs; ++pair) {
      const int64_t b = pair / d.Hkv, kvh = pair % d.Hkv;
      const Rows kr = load_rows(io, k, d.kv_at(d.k, b, kvh), d.Tk, d.D, d.k.tok, kbuf);
      const Rows vr = load_rows(io, v, d.kv_at(d.v, b, kvh), d.Tk, d.D, d.v.tok, vbuf);
      const int64_t dk_off = d.kv_at(d.dk, b, kvh), dv_off = d.kv_at(d.dv, b, kvh);
      int64_t lddk = 0, lddv = 0;
      float* dk_b = out_rows(dk, dk_off, d.dk.tok, dkbuf, &lddk, d.D);
      float* dv_b = out_rows(dv, dv_off, d.dv.tok, dvbuf, &lddv, d.D);
      transpose_head(isa, kt, kr.p, d.Tk, d.D, kr.ld);
      transpose_head(isa, vt, vr.p, d.Tk, d.D, vr.ld);
      for (int64_t t = 0; t < d.Tk; ++t) {
        std::memset(dk_b + t * lddk, 0, sizeof(float) * static_cast<size_t>(d.D));
        std::memset(dv_b + t * lddv, 0, sizeof(float) * static_cast<size_t>(d.D));
      }
      for (int64_t h = kvh * d.group(); h < (kvh + 1) * d.group(); ++h) {
        const float* lse_bh = lsep + (b * d.Hq + h) * d.Tq;
        for (int64_t i0 = 0; i0 < d.Tq; i0 += kQueryBlock) {
          const int64_t rows = std::min(kQueryBlock, d.Tq - i0);
          const int64_t nk = d.offset() + i0 + rows;
          // Each operand's first row of the block.
          const int64_t q_blk = d.q_at(d.q, b, h) + i0 * d.q.tok;
          const int64_t dq_off = d.q_at(d.dq, b, h) + i0 * d.dq.tok;
          prefetch_rows<true>(dq.raw(), elem_bytes(dq), dq_off, rows, d.D, d.dq.tok);
          prefetch_backward_next(d, pair, pairs, h, i0, q, k, v, out, dout);
          const Rows qr = load_rows(io, q, q_blk, rows, d.D, d.q.tok, qbuf);
          const Rows orr =
              load_rows(io, out, d.q_at(d.out, b, h) + i0 * d.out.tok, rows, d.D, d.out.tok, obuf);
          const Rows dor = load_rows(io, dout, d.q_at(d.dout, b, h) + i0 * d.dout.tok, rows, d.D,
                                     d.dout.tok, dobuf);
          int64_t lddq = 0;
          float* dq_blk = out_rows(dq, dq_off, d.dq.tok, dqbuf, &lddq, d.D);
          const int64_t base = d.offset() + i0;
          // As in the forward: only keys [lo, nk) can be seen; column c is key lo + c.
          const int64_t lo = d.first_key(b, base), nc = nk - lo;
          causal_scores(isa, rows, base - lo, d.D, scale, qr.p, qr.ld, kt + lo, d.Tk, p, nc);
          causal_scores(isa, rows, base - lo, d.D, 1.0f, dor.p, dor.ld, vt + lo, d.Tk, ds, nc);
          softmax_grad_block(isa, d, b, i0, rows, lo, scale, lse_bh, p, ds, [&](int64_t r) {
            return cpu::dot_row(isa, dor.p + r * dor.ld, orr.p + r * orr.ld, d.D);
          });
          causal_keys_accumulate(isa, rows, base - lo, d.D, p, nc, dor.p, dor.ld, dv_b + lo * lddv,
                                 lddv);
          causal_rows_product(isa, rows, base - lo, d.D, ds, nc, kr.p + lo * kr.ld, kr.ld, dq_blk,
                              lddq);
          store_rows(io, dq, dq_off, rows, d.D, d.dq.tok, dq_blk);
          causal_keys_accumulate(isa, rows, base - lo, d.D, ds, nc, qr.p, qr.ld, dk_b + lo * lddk,
                                 lddk);
        }
      }
      store_rows(io, dk, dk_off, d.Tk, d.D, d.dk.tok, dk_b);
      store_rows(io, dv, dv_off, d.Tk, d.D, d.dv.tok, dv_b);
    }
  }
}

void check_backward_rest(const char* op, const AttnDims& d, const Tensor& dout, const Tensor& out,
                         const Tensor& lse) {
  check_input(dout, op, "dout");
  check_shape(dout, {d.B, d.Tq, d.Hq, d.D}, "dout");
  check_out_lse(op, d, out, lse);
}

}  // namespace

void attention_forward(ExecContext& ctx, Tensor& out, Tensor& lse, const Tensor& q, const Tensor& k,
                       const Tensor& v, int64_t window, const Tensor& sample_starts) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Attention);
  const char* op = "attention_forward";
  const AttnDims d = check_qkv(op, q, k, v, window, sample_starts);
  check_out_lse(op, d, out, lse);
  forward_impl(ctx, d, out, lse, q, k, v);
}

void attention_forward_packed(ExecContext& ctx, Tensor& out, Tensor& lse, const Tensor& qkv,
                              int64_t heads, int64_t window, const Tensor& sample_starts) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Attention);
  const char* op = "attention_forward_packed";
  const AttnDims d = check_packed(op, qkv, heads, window, sample_starts);
  check_out_lse(op, d, out, lse);
  forward_impl(ctx, d, out, lse, qkv, qkv, qkv);
}

void attention_backward(ExecContext& ctx, Tensor& dq, Tensor& dk, Tensor& dv, const Tensor& dout,
                        const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                        const Tensor& lse, int64_t window, const Tensor& sample_starts) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Attention);
  const char* op = "attention_backward";
  const AttnDims d = check_qkv(op, q, k, v, window, sample_starts);
  check_input(dq, op, "dq");
  check_input(dk, op, "dk");
  check_input(dv, op, "dv");
  check_shape(dq, q.shape(), "dq");
  check_shape(dk, k.shape(), "dk");
  check_shape(dv, k.shape(), "dv");
  check_backward_rest(op, d, dout, out, lse);
  if (dq.numel() == 0) {  // no queries: nothing flows back to the keys and values
    dk.zero_();
    dv.zero_();
    return;
  }
  backward_impl(ctx, d, dq, dk, dv, dout, q, k, v, out, lse);
}

void attention_backward_packed(ExecContext& ctx, Tensor& dqkv, const Tensor& dout,
                               const Tensor& qkv, const Tensor& out, const Tensor& lse,
                               int64_t heads, int64_t window, const Tensor& sample_starts) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Attention);
  const char* op = "attention_backward_packed";
  const AttnDims d = check_packed(op, qkv, heads, window, sample_starts);
  check_input(dqkv, op, "dqkv");
  check_shape(dqkv, qkv.shape(), "dqkv");
  check_backward_rest(op, d, dout, out, lse);
  if (dqkv.numel() == 0) return;
  backward_impl(ctx, d, dqkv, dqkv, dqkv, dout, qkv, qkv, qkv, out, lse);
}

}  // namespace cpu
}  // namespace braid
