// Token + learned position embedding: gather forward, deterministic scatter-add backward.
//
// Buffers: tokens (B, T) int32; wte / dwte (rows, C), wpe / dwpe (P, C), out / dout (B, T, C),
// f32/bf16/f16 each, f32 arithmetic rounded once on store. The backward takes no float atomics
// and adds in the CPU's order, so f32 gradients equal the CPU's bit for bit:
//  - the token table: a block owns 32 table rows x 256 columns, scans the tokens in tiles, keeps
//    the positions whose token it owns (in position order, by a ballot prefix sum), and each
//    thread adds those dout elements of its column to an f32 accumulator in shared memory,
//    seeded from the gradient the first time a row is touched; touched rows are stored back;
//  - the position table: a thread per (t, c) adds its batch rows in order.
#include "core/kernels/cuda/any_dtype.cuh"
#include "core/kernels/cuda/embedding.h"

namespace braid::cuda {

namespace {

__global__ void check_tokens_kernel(unsigned long long* bad, const int32_t* tokens, int64_t N,
                                    int64_t vocab) {
  for (int64_t i = global_thread(); i < N; i += grid_threads())
    if (tokens[i] < 0 || tokens[i] >= vocab) atomicMin(bad, static_cast<unsigned long long>(i));
}

// A block per position (grid-stride), threads across the columns.
__global__ void embedding_forward_kernel(AnyPtr out, const int32_t* tokens, AnyConstPtr wte,
                                         int64_t rows, int64_t row_begin, AnyConstPtr wpe,
                                         int64_t pos_offset, int64_t N, int64_t T, int64_t C) {
  for (int64_t i = blockIdx.x; i < N; i += gridDim.x) {
    const int64_t local = static_cast<int64_t>(tokens[i]) - row_begin;
    const bool held = local >= 0 && local < rows;
    const int64_t prow = (pos_offset + i % T) * C;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
      float v = held ? wte[local * C + c] : 0.0f;
      if (wpe.p) v += wpe[prow + c];
      out.set(i * C + c, v);
    }
  }
}

constexpr int kTableRows = 32;      // table rows per block (bits of the `touched` mask)
constexpr int kTableThreads = 256;  // columns per block, one per thread; tokens per tile

__global__ void __launch_bounds__(kTableThreads)
    embedding_table_grad_kernel(AnyPtr g, int64_t rows, int64_t row_begin, AnyConstPtr dout,
                                const int32_t* tokens, int64_t N, int64_t C) {
  __shared__ float acc[kTableRows][kTableThreads];  // f32 sums of this block's rows
  __shared__ int tile_pos[kTableThreads];           // the tile's positions this block owns
  __shared__ int tile_row[kTableThreads];           // and their row in [0, kTableRows)
  __shared__ int warp_count[kTableThreads / 32];
  const int64_t r0 = blockIdx.x * static_cast<int64_t>(kTableRows);  // first row, local
  const int64_t c = blockIdx.y * static_cast<int64_t>(kTableThreads) + threadIdx.x;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  uint32_t touched = 0;  // the same in every thread: all see the same matches
  for (int64_t base = 0; base < N; base += kTableThreads) {
    const int64_t i = base + threadIdx.x;
    int row = -1;
    if (i < N) {
      const int64_t local = static_cast<int64_t>(tokens[i]) - row_begin - r0;
      if (local >= 0 && local < kTableRows && r0 + local < rows) row = static_cast<int>(local);
    }
    // Compact the owned positions of the tile, keeping their order.
    const unsigned ballot = __ballot_sync(0xffffffffu, row >= 0);
    if (lane == 0) warp_count[warp] = __popc(ballot);
    __syncthreads();
    int before = 0, total = 0;
    for (int w = 0; w < kTableThreads / 32; ++w) {
      before += w < warp ? warp_count[w] : 0;
      total += warp_count[w];
    }
    if (row >= 0) {
      const int at = before + __popc(ballot & ((1u << lane) - 1u));
      tile_pos[at] = static_cast<int>(i);
      tile_row[at] = row;
    }
    __syncthreads();
    for (int m = 0; m < total; ++m) {
      const int r = tile_row[m];
      const uint32_t bit = 1u << r;
      if (c < C) {
        const float seed = (touched & bit) ? acc[r][threadIdx.x] : g[(r0 + r) * C + c];
        acc[r][threadIdx.x] = seed + dout[static_cast<int64_t>(tile_pos[m]) * C + c];
      }
      touched |= bit;
    }
    __syncthreads();  // the next tile overwrites tile_pos, tile_row, warp_count
  }
  if (c < C)
    for (int r = 0; r < kTableRows; ++r)
      if (touched & (1u << r)) g.set((r0 + r) * C + c, acc[r][threadIdx.x]);
}

__global__ void embedding_position_grad_kernel(AnyPtr g, AnyConstPtr dout, int64_t B, int64_t T,
                                               int64_t C, int64_t pos_offset) {
  for (int64_t j = global_thread(); j < T * C; j += grid_threads()) {
    const int64_t t = j / C, c = j % C;
    const int64_t at = (pos_offset + t) * C + c;
    float acc = g[at];
    for (int64_t b = 0; b < B; ++b) acc += dout[(b * T + t) * C + c];
    g.set(at, acc);
  }
}

}  // namespace

void launch_check_tokens(void* stream, unsigned long long* bad, const int32_t* tokens, int64_t N,
                         int64_t vocab) {
  if (N == 0) return;
  check_tokens_kernel<<<grid_for(N, kThreads), kThreads, 0, as_stream(stream)>>>(bad, tokens, N,
                                                                                 vocab);
}

void launch_embedding_forward(void* stream, void* out, int tout, const int32_t* tokens,
                              const void* wte, int twte, int64_t rows, int64_t row_begin,
                              const void* wpe, int twpe, int64_t pos_offset, int64_t N, int64_t T,
                              int64_t C) {
  if (N == 0 || C == 0) return;
  const int threads = C <= 128 ? 64 : C <= 512 ? 128 : 256;
  const unsigned blocks = row_blocks(N);
  embedding_forward_kernel<<<blocks, threads, 0, as_stream(stream)>>>(
      {out, tout}, tokens, {wte, twte}, rows, row_begin, {wpe, twpe}, pos_offset, N, T, C);
}

void launch_embedding_table_grad(void* stream, void* dwte, int tdwte, int64_t rows,
                                 int64_t row_begin, const void* dout, int tdout,
                                 const int32_t* tokens, int64_t N, int64_t C) {
  if (N == 0 || C == 0 || rows == 0) return;
  const dim3 grid(static_cast<unsigned>((rows + kTableRows - 1) / kTableRows),
                  static_cast<unsigned>((C + kTableThreads - 1) / kTableThreads));
  embedding_table_grad_kernel<<<grid, kTableThreads, 0, as_stream(stream)>>>(
      {dwte, tdwte}, rows, row_begin, {dout, tdout}, tokens, N, C);
}

void launch_embedding_position_grad(void* stream, void* dwpe, int tdwpe, const void* dout,
                                    int tdout, int64_t B, int64_t T, int64_t C,
                                    int64_t pos_offset) {
  if (T * C == 0) return;
  embedding_position_grad_kernel<<<grid_for(T * C, kThreads), kThreads, 0, as_stream(stream)>>>(
      {dwpe, tdwpe}, {dout, tdout}, B, T, C, pos_offset);
}

}  // namespace braid::cuda
