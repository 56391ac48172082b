// Causal attention with grouped-query heads, flash-style: no T x T matrix is ever stored.
//
// Buffer contract: q, out, dout, dq (B, Tq, Hq, D); k, v, dk, dv (B, Tk, Hkv, D), one storage
// dtype; lse and delta (B, Hq, Tq) f32. Query row i sits at absolute position Tk - Tq + i and
// sees keys 0 ..= Tk - Tq + i, or with a sliding window w > 0 only the last w of them; query
// head h reads kv head h / (Hq / Hkv). Scores are scaled by 1/sqrt(D); all arithmetic is f32.
//
// Shape of the kernels: a block holds W warps, each owning one row (a query row in the forward
// and dq kernels, a key row in the dk/dv kernel) whose vectors live in shared memory. The block
// walks the other side in tiles of 32 rows, loaded into shared memory in chunks of dc columns,
// where lane j of every warp handles row j of the tile: the 32 scores of a tile are one per
// lane, and the weighted sums over a tile broadcast lane j's weight to the warp. Forward keeps
// a running max and sum (online softmax); backward recomputes the probabilities from lse, dq in
// one kernel and dk, dv in another (each output row owned by one warp: no atomics, and sums run
// in a fixed order).
#include "core/kernels/cuda/attention.h"
#include "core/kernels/cuda/common.cuh"

namespace braid::cuda {

namespace {

constexpr unsigned kFull = 0xffffffffu;
constexpr int kTile = 32;                  // rows per tile: one per lane
constexpr int kMaxChunk = 128;             // columns per chunk: up to 4 per lane
constexpr size_t kSharedBytes = 48 << 10;  // what a block gets without opting in

struct Shape {
  int64_t B, Tq, Tk, Hq, Hkv, D;
  int dc;  // columns per chunk, a multiple of 32
  int dp;  // D rounded up to a multiple of dc (the row vectors' length, zero past D)
  float scale;
  int64_t window;  // 0: every earlier key; w > 0: the last w keys up to the row's position
  __host__ __device__ int64_t offset() const { return Tk - Tq; }
  __host__ __device__ int64_t group() const { return Hq / Hkv; }
  // The first key query row i sees (its last is offset() + i).
  __host__ __device__ int64_t first_key(int64_t i) const {
    const int64_t lo = offset() + i - window + 1;
    return window > 0 && lo > 0 ? lo : 0;
  }
  // The last query row that sees key j (its first is j - offset()).
  __host__ __device__ int64_t last_query(int64_t j) const {
    return window > 0 ? j - offset() + window - 1 : Tq - 1;
  }
};

// Rows [t0, t0 + 32) and columns [c0, c0 + dc) of head h of x (B, T, H, D), batch b, into tile
// (32 rows, stride dc + 1: lane j reading row j is free of bank conflicts); zeros outside x.
template <typename T>
__device__ void load_tile(float* tile, const T* x, int64_t b, int64_t T_, int64_t H, int64_t h,
                          int64_t D, int64_t t0, int c0, int dc) {
  const int ld = dc + 1;
  for (int idx = threadIdx.x; idx < kTile * dc; idx += blockDim.x) {
    const int r = idx / dc, c = idx - r * dc;
    const int64_t t = t0 + r, d = c0 + c;
    tile[r * ld + c] = t < T_ && d < D ? load_f32(x, ((b * T_ + t) * H + h) * D + d) : 0.0f;
  }
}

// One row of D values at x + off into a warp's vector (dp floats) times mul, zeros past D.
template <typename T>
__device__ void load_row(float* vec, const T* x, int64_t off, int64_t D, int dp, float mul) {
  for (int d = threadIdx.x & 31; d < dp; d += 32)
    vec[d] = d < D ? load_f32(x, off + d) * mul : 0.0f;
}

__device__ __forceinline__ float dot(const float* a, const float* b, int n) {
  float s = 0.0f;
  for (int c = 0; c < n; ++c) s += a[c] * b[c];
  return s;
}

// acc (a warp vector's dc columns of this chunk) <- acc * alpha + sum over tile rows j < jn of
// w_j tile[j], with w_j held by lane j. jn is the same in every lane.
__device__ __forceinline__ void accumulate(float* acc, const float* tile, int dc, float w,
                                           float alpha, int jn) {
  const int ld = dc + 1, lane = threadIdx.x & 31, nt = dc >> 5;
  float a[kMaxChunk / 32];
#pragma unroll
  for (int t = 0; t < kMaxChunk / 32; ++t) a[t] = t < nt ? acc[lane + 32 * t] * alpha : 0.0f;
  for (int j = 0; j < jn; ++j) {
    const float wj = __shfl_sync(kFull, w, j);
    const float* row = tile + j * ld + lane;
#pragma unroll
    for (int t = 0; t < kMaxChunk / 32; ++t)
      if (t < nt) a[t] += wj * row[32 * t];
  }
#pragma unroll
  for (int t = 0; t < kMaxChunk / 32; ++t)
    if (t < nt) acc[lane + 32 * t] = a[t];
}

__device__ __forceinline__ float warp_max_all(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(kFull, v, o));
  return v;
}
__device__ __forceinline__ float warp_sum_all(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFull, v, o);
  return v;
}

// The (batch * heads, row tile) of a block: grid.x = heads * tiles, tiles fastest.
__device__ __forceinline__ void block_coords(int64_t tiles, int64_t& bh, int64_t& tile) {
  bh = blockIdx.x / tiles;
  tile = blockIdx.x - bh * tiles;
}

// ---- forward: one warp per query row ----
template <typename T>
__global__ void attn_fwd_kernel(T* out, float* lse, const T* q, const T* k, const T* v, Shape s,
                                int64_t tiles) {
  extern __shared__ float smem[];
  const int W = static_cast<int>(blockDim.x >> 5), warp = threadIdx.x >> 5, lane = threadIdx.x & 31,
            ld = s.dc + 1, nchunks = s.dp / s.dc;
  float* k_tile = smem;                                  // (32, dc + 1)
  float* v_tile = k_tile + kTile * ld;                   // (32, dc + 1)
  float* q_row = v_tile + kTile * ld + warp * 2 * s.dp;  // (dp): q * scale
  float* o_acc = q_row + s.dp;                           // (dp): unnormalised output
  int64_t bh, tile;
  block_coords(tiles, bh, tile);
  const int64_t b = bh / s.Hq, h = bh % s.Hq, kvh = h / s.group();
  const int64_t i0 = tile * W, i = i0 + warp;
  const bool valid = i < s.Tq;
  const int64_t pos = s.offset() + i;  // the row's last visible key
  const int64_t lo = s.first_key(i);   // and its first
  const int64_t last_row = (i0 + W < s.Tq ? i0 + W : s.Tq) - 1;
  const int64_t kend = s.offset() + last_row + 1;  // keys any row of the block sees
  const int64_t kbegin = s.first_key(i0) / kTile * kTile;
  const int64_t q_off = ((b * s.Tq + i) * s.Hq + h) * s.D;
  if (valid) {
    load_row(q_row, q, q_off, s.D, s.dp, s.scale);
    for (int d = lane; d < s.dp; d += 32) o_acc[d] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  for (int64_t kt0 = kbegin; kt0 < kend; kt0 += kTile) {
    // the warp sees a key of this tile
    const bool active = valid && kt0 <= pos && kt0 + kTile - 1 >= lo;
    float sc = 0.0f;
    for (int c = 0; c < nchunks; ++c) {
      __syncthreads();
      load_tile(k_tile, k, b, s.Tk, s.Hkv, kvh, s.D, kt0, c * s.dc, s.dc);
      if (c == nchunks - 1) load_tile(v_tile, v, b, s.Tk, s.Hkv, kvh, s.D, kt0, c * s.dc, s.dc);
      __syncthreads();
      if (active) sc += dot(q_row + c * s.dc, k_tile + lane * ld, s.dc);
    }
    float p = 0.0f, alpha = 1.0f;
    int jn = 0;
    if (active) {
      const bool vis = kt0 + lane <= pos && kt0 + lane >= lo;
      const float sv = vis ? sc : -INFINITY;
      const float m_new = fmaxf(m, warp_max_all(sv));
      alpha = expf(m - m_new);  // 0 on the first tile, where m is -inf
      p = vis ? expf(sv - m_new) : 0.0f;
      l = l * alpha + warp_sum_all(p);
      m = m_new;
      jn = static_cast<int>(pos - kt0 + 1 < kTile ? pos - kt0 + 1 : kTile);
    }
    for (int c = nchunks - 1; c >= 0; --c) {  // the last chunk of v is already loaded
      if (c != nchunks - 1) {
        __syncthreads();
        load_tile(v_tile, v, b, s.Tk, s.Hkv, kvh, s.D, kt0, c * s.dc, s.dc);
        __syncthreads();
      }
      if (active) accumulate(o_acc + c * s.dc, v_tile, s.dc, p, alpha, jn);
    }
  }
  if (!valid) return;
  const float inv = 1.0f / l;
  for (int d = lane; d < s.D; d += 32) store_f32(out, q_off + d, o_acc[d] * inv);
  if (lane == 0) lse[(b * s.Hq + h) * s.Tq + i] = m + logf(l);
}

// ---- backward ----

// delta (B, Hq, Tq) = rowwise dout . out: sum_j p_j dp_j of the softmax backward. One warp per
// row; rows in the memory order of out (b, t, h).
template <typename T>
__global__ void attn_delta_kernel(float* delta, const T* dout, const T* out, int64_t B, int64_t Tq,
                                  int64_t Hq, int64_t D) {
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x >> 5);
  const int lane = threadIdx.x & 31;
  for (int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x >> 5) + (threadIdx.x >> 5);
       r < B * Tq * Hq; r += warps) {
    float sum = 0.0f;
    for (int64_t d = lane; d < D; d += 32)
      sum += load_f32(dout, r * D + d) * load_f32(out, r * D + d);
    sum = warp_sum_all(sum);
    const int64_t h = r % Hq, t = (r / Hq) % Tq, b = r / (Hq * Tq);
    if (lane == 0) delta[(b * Hq + h) * Tq + t] = sum;
  }
}

// dq: one warp per query row, over the tiles of keys it sees.
//   dq_i = sum_j ds_ij k_j,  ds_ij = p_ij (dout_i . v_j - delta_i) / sqrt(D),
//   p_ij = exp(q_i . k_j / sqrt(D) - lse_i)
template <typename T>
__global__ void attn_bwd_dq_kernel(T* dq, const T* q, const T* k, const T* v, const T* dout,
                                   const float* lse, const float* delta, Shape s, int64_t tiles) {
  extern __shared__ float smem[];
  const int W = static_cast<int>(blockDim.x >> 5), warp = threadIdx.x >> 5, lane = threadIdx.x & 31,
            ld = s.dc + 1, nchunks = s.dp / s.dc;
  float* k_tile = smem;
  float* v_tile = k_tile + kTile * ld;
  float* q_row = v_tile + kTile * ld + warp * 3 * s.dp;  // q * scale
  float* do_row = q_row + s.dp;
  float* dq_acc = do_row + s.dp;
  int64_t bh, tile;
  block_coords(tiles, bh, tile);
  const int64_t b = bh / s.Hq, h = bh % s.Hq, kvh = h / s.group();
  const int64_t i0 = tile * W, i = i0 + warp;
  const bool valid = i < s.Tq;
  const int64_t pos = s.offset() + i;
  const int64_t lo = s.first_key(i);
  const int64_t last_row = (i0 + W < s.Tq ? i0 + W : s.Tq) - 1;
  const int64_t kend = s.offset() + last_row + 1;
  const int64_t kbegin = s.first_key(i0) / kTile * kTile;
  const int64_t q_off = ((b * s.Tq + i) * s.Hq + h) * s.D;
  float lse_i = 0.0f, delta_i = 0.0f;
  if (valid) {
    load_row(q_row, q, q_off, s.D, s.dp, s.scale);
    load_row(do_row, dout, q_off, s.D, s.dp, 1.0f);
    for (int d = lane; d < s.dp; d += 32) dq_acc[d] = 0.0f;
    lse_i = lse[(b * s.Hq + h) * s.Tq + i];
    delta_i = delta[(b * s.Hq + h) * s.Tq + i];
  }
  for (int64_t kt0 = kbegin; kt0 < kend; kt0 += kTile) {
    const bool active = valid && kt0 <= pos && kt0 + kTile - 1 >= lo;
    float sc = 0.0f, dp = 0.0f;
    for (int c = 0; c < nchunks; ++c) {
      __syncthreads();
      load_tile(k_tile, k, b, s.Tk, s.Hkv, kvh, s.D, kt0, c * s.dc, s.dc);
      load_tile(v_tile, v, b, s.Tk, s.Hkv, kvh, s.D, kt0, c * s.dc, s.dc);
      __syncthreads();
      if (active) {
        sc += dot(q_row + c * s.dc, k_tile + lane * ld, s.dc);
        dp += dot(do_row + c * s.dc, v_tile + lane * ld, s.dc);
      }
    }
    const bool vis = active && kt0 + lane <= pos && kt0 + lane >= lo;
    const float ds = vis ? expf(sc - lse_i) * (dp - delta_i) * s.scale : 0.0f;
    const int jn = active ? static_cast<int>(pos - kt0 + 1 < kTile ? pos - kt0 + 1 : kTile) : 0;
    for (int c = nchunks - 1; c >= 0; --c) {  // the last chunk of k is already loaded
      if (c != nchunks - 1) {
        __syncthreads();
        load_tile(k_tile, k, b, s.Tk, s.Hkv, kvh, s.D, kt0, c * s.dc, s.dc);
        __syncthreads();
      }
      if (active) accumulate(dq_acc + c * s.dc, k_tile, s.dc, ds, 1.0f, jn);
    }
  }
  if (!valid) return;
  for (int d = lane; d < s.D; d += 32) store_f32(dq, q_off + d, dq_acc[d]);
}

// dk, dv: one warp per key row j of kv head kvh, over every query head of its group (in order)
// and the tiles of query rows that see it (i >= j - offset).
//   dv_j = sum_i p_ij dout_i,  dk_j = sum_i ds_ij q_i
template <typename T>
__global__ void attn_bwd_dkdv_kernel(T* dk, T* dv, const T* q, const T* k, const T* v,
                                     const T* dout, const float* lse, const float* delta, Shape s,
                                     int64_t tiles) {
  extern __shared__ float smem[];
  const int W = static_cast<int>(blockDim.x >> 5), warp = threadIdx.x >> 5, lane = threadIdx.x & 31,
            ld = s.dc + 1, nchunks = s.dp / s.dc;
  float* q_tile = smem;
  float* do_tile = q_tile + kTile * ld;
  float* k_row = do_tile + kTile * ld + warp * 4 * s.dp;
  float* v_row = k_row + s.dp;
  float* dk_acc = v_row + s.dp;
  float* dv_acc = dk_acc + s.dp;
  int64_t bkv, tile;
  block_coords(tiles, bkv, tile);
  const int64_t b = bkv / s.Hkv, kvh = bkv % s.Hkv;
  const int64_t j0 = tile * W, j = j0 + warp;
  const bool valid = j < s.Tk;
  const int64_t kv_off = ((b * s.Tk + j) * s.Hkv + kvh) * s.D;
  if (valid) {
    load_row(k_row, k, kv_off, s.D, s.dp, 1.0f);
    load_row(v_row, v, kv_off, s.D, s.dp, 1.0f);
    for (int d = lane; d < s.dp; d += 32) dk_acc[d] = dv_acc[d] = 0.0f;
  }
  const int64_t first_query = j - s.offset();  // the first query row that sees key j
  const int64_t last_query = s.last_query(j);   // and the last
  const int64_t block_first = j0 - s.offset() > 0 ? j0 - s.offset() : 0;
  const int64_t block_last = s.last_query(j0 + W - 1);
  const int64_t qend = block_last + 1 < s.Tq ? block_last + 1 : s.Tq;
  for (int64_t h = kvh * s.group(); h < (kvh + 1) * s.group(); ++h) {
    const float* lse_h = lse + (b * s.Hq + h) * s.Tq;
    const float* delta_h = delta + (b * s.Hq + h) * s.Tq;
    for (int64_t qt0 = block_first; qt0 < qend; qt0 += kTile) {
      const int64_t i = qt0 + lane;
      const bool active = valid && qt0 + kTile - 1 >= first_query && qt0 <= last_query;
      float sc = 0.0f, dp = 0.0f;
      for (int c = 0; c < nchunks; ++c) {
        __syncthreads();
        load_tile(q_tile, q, b, s.Tq, s.Hq, h, s.D, qt0, c * s.dc, s.dc);
        load_tile(do_tile, dout, b, s.Tq, s.Hq, h, s.D, qt0, c * s.dc, s.dc);
        __syncthreads();
        if (active) {
          sc += dot(k_row + c * s.dc, q_tile + lane * ld, s.dc);
          dp += dot(v_row + c * s.dc, do_tile + lane * ld, s.dc);
        }
      }
      const bool vis = active && i < s.Tq && i >= first_query && i <= last_query;
      float p = 0.0f, ds = 0.0f;
      if (vis) {
        p = expf(sc * s.scale - lse_h[i]);
        ds = p * (dp - delta_h[i]) * s.scale;
      }
      const int jn = active ? static_cast<int>(s.Tq - qt0 < kTile ? s.Tq - qt0 : kTile) : 0;
      for (int c = nchunks - 1; c >= 0; --c) {  // the last chunks of q and dout are loaded
        if (c != nchunks - 1) {
          __syncthreads();
          load_tile(q_tile, q, b, s.Tq, s.Hq, h, s.D, qt0, c * s.dc, s.dc);
          load_tile(do_tile, dout, b, s.Tq, s.Hq, h, s.D, qt0, c * s.dc, s.dc);
          __syncthreads();
        }
        if (active) {
          accumulate(dv_acc + c * s.dc, do_tile, s.dc, p, 1.0f, jn);
          accumulate(dk_acc + c * s.dc, q_tile, s.dc, ds, 1.0f, jn);
        }
      }
    }
  }
  if (!valid) return;
  for (int d = lane; d < s.D; d += 32) {
    store_f32(dk, kv_off + d, dk_acc[d]);
    store_f32(dv, kv_off + d, dv_acc[d]);
  }
}

// Warps per block, chunk width and vector length for rows of D columns with `vectors` row
// vectors per warp: the most warps (most reuse of a loaded tile), then the widest chunk (fewest
// passes) that fit in the shared memory.
struct Launch {
  int dc, dp, warps;
  size_t smem;
};

Launch plan(int64_t D, int vectors) {
  for (int w : {8, 4, 2, 1}) {
    for (int64_t nch = (D + kMaxChunk - 1) / kMaxChunk;; ++nch) {
      const int64_t dc = ((D + nch - 1) / nch + 31) / 32 * 32;
      const int64_t dp = (D + dc - 1) / dc * dc;
      const size_t smem = (2 * kTile * static_cast<size_t>(dc + 1) +
                           static_cast<size_t>(w) * vectors * static_cast<size_t>(dp)) *
                          sizeof(float);
      if (smem <= kSharedBytes) return {static_cast<int>(dc), static_cast<int>(dp), w, smem};
      if (dc == 32) break;
    }
  }
  return {0, 0, 0, 0};  // D beyond kAttentionMaxHeadDim, which the caller checked
}

Shape shape_of(const AttnDims& d, const Launch& l) {
  return {d.B,  d.Tq, d.Tk, d.Hq, d.Hkv, d.D, l.dc, l.dp, 1.0f / sqrtf(static_cast<float>(d.D)),
          d.window};
}

}  // namespace

void launch_attention_forward(void* stream, void* out, float* lse, const void* q, const void* k,
                              const void* v, int dtype, AttnDims d) {
  if (d.B * d.Tq * d.Hq == 0 || d.D == 0) return;
  const Launch l = plan(d.D, 2);
  const int64_t tiles = (d.Tq + l.warps - 1) / l.warps;
  const Shape s = shape_of(d, l);
  const unsigned blocks = static_cast<unsigned>(d.B * d.Hq * tiles);
  with_float_type(dtype, [&]<typename T>() {
    attn_fwd_kernel<T><<<blocks, 32 * l.warps, l.smem, as_stream(stream)>>>(
        static_cast<T*>(out), lse, static_cast<const T*>(q), static_cast<const T*>(k),
        static_cast<const T*>(v), s, tiles);
  });
}

void launch_attention_backward(void* stream, void* dq, void* dk, void* dv, float* delta,
                               const void* dout, const void* q, const void* k, const void* v,
                               const void* out, const float* lse, int dtype, AttnDims d) {
  if (d.B * d.Tq * d.Hq == 0 || d.D == 0) return;
  const int64_t rows = d.B * d.Tq * d.Hq;
  const Launch lq = plan(d.D, 3), lkv = plan(d.D, 4);
  const int64_t q_tiles = (d.Tq + lq.warps - 1) / lq.warps;
  const int64_t kv_tiles = (d.Tk + lkv.warps - 1) / lkv.warps;
  with_float_type(dtype, [&]<typename T>() {
    const T* dout_t = static_cast<const T*>(dout);
    const T* q_t = static_cast<const T*>(q);
    const T* k_t = static_cast<const T*>(k);
    const T* v_t = static_cast<const T*>(v);
    attn_delta_kernel<T><<<grid_for(rows, 8), 256, 0, as_stream(stream)>>>(
        delta, dout_t, static_cast<const T*>(out), d.B, d.Tq, d.Hq, d.D);
    attn_bwd_dq_kernel<T><<<static_cast<unsigned>(d.B * d.Hq * q_tiles), 32 * lq.warps, lq.smem,
                            as_stream(stream)>>>(static_cast<T*>(dq), q_t, k_t, v_t, dout_t, lse,
                                                 delta, shape_of(d, lq), q_tiles);
    attn_bwd_dkdv_kernel<T>
        <<<static_cast<unsigned>(d.B * d.Hkv * kv_tiles), 32 * lkv.warps, lkv.smem,
           as_stream(stream)>>>(static_cast<T*>(dk), static_cast<T*>(dv), q_t, k_t, v_t, dout_t,
                                lse, delta, shape_of(d, lkv), kv_tiles);
  });
}

}  // namespace braid::cuda
