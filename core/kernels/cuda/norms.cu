// LayerNorm and RMSNorm over the last dimension, forward and backward.
//
// Buffers: x, y, dy, dx (N, C) row-major, w, b (C), any of f32/bf16/f16 each; mean, rstd (N)
// f32, written by the forward and read by the backward. Arithmetic in f32 with the CPU kernels'
// per-element formulas (core/kernels/math/norms.h). One block per row for the row statistics
// and dx. The weight gradients are deterministic and take no atomics: every (chunk of rows,
// column) sums its rows in order into a partial (the CPU's chunks, core/kernels/cpu/
// chunked_sum.h, without FMA contraction, so the f32 partials equal the CPU's bit for bit),
// then each column adds its chunk partials in chunk order onto dw / db.
#include "core/kernels/cuda/any_dtype.cuh"
#include "core/kernels/cuda/norms.h"
#include "core/kernels/math/norms.h"

namespace braid::cuda {

namespace {

// Two block sums at once (one pair of barriers). blockDim.x a multiple of 32, at most 1024.
__device__ __forceinline__ float2 block_sum2(float a, float b, float2* shared) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  a = warp_sum(a);
  b = warp_sum(b);
  __syncthreads();  // shared may still be read by a previous call
  if (lane == 0) shared[warp] = make_float2(a, b);
  __syncthreads();
  const int warps = (blockDim.x + 31) >> 5;
  const float2 v = lane < warps ? shared[lane] : make_float2(0.0f, 0.0f);
  return make_float2(warp_sum(v.x), warp_sum(v.y));
}

// kLayer: LayerNorm (mean, bias), else RMSNorm. Two passes for the variance, as the CPU, so a
// large mean does not cancel it.
template <bool kLayer>
__global__ void norm_forward_kernel(AnyPtr y, float* mean, float* rstd, AnyConstPtr x,
                                    AnyConstPtr w, AnyConstPtr b, int64_t N, int64_t C, float inv_c,
                                    float eps) {
  __shared__ float red[32];
  for (int64_t r = blockIdx.x; r < N; r += gridDim.x) {
    const int64_t row = r * C;
    float m = 0.0f;
    if constexpr (kLayer) {
      float s = 0.0f;
      for (int64_t c = threadIdx.x; c < C; c += blockDim.x) s += x[row + c];
      m = block_sum(s, red) * inv_c;
    }
    float v = 0.0f;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
      const float d = x[row + c] - m;
      v += d * d;
    }
    const float rs = math::norm_rstd(block_sum(v, red) * inv_c, eps);
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
      if constexpr (kLayer)
        y.set(row + c, math::layernorm_y(x[row + c], m, rs, w[c], b[c]));
      else
        y.set(row + c, math::rmsnorm_y(x[row + c], rs, w[c]));
    }
    if (threadIdx.x == 0) {
      if constexpr (kLayer) mean[r] = m;
      rstd[r] = rs;
    }
  }
}

// LayerNorm: dx = rstd (g - mean_c(g) - xhat mean_c(g xhat)) with g = dy w;
// RMSNorm: dx = rstd (g - xhat mean_c(g xhat)). Every dy of the row is read before any dx of it
// is written (the barrier in the sum), so dx may be dy.
template <bool kLayer>
__global__ void norm_backward_dx_kernel(AnyPtr dx, AnyConstPtr dy, AnyConstPtr x, AnyConstPtr w,
                                        const float* mean, const float* rstd, int64_t N, int64_t C,
                                        float inv_c) {
  __shared__ float2 red[32];
  for (int64_t r = blockIdx.x; r < N; r += gridDim.x) {
    const int64_t row = r * C;
    const float m = kLayer ? mean[r] : 0.0f, rs = rstd[r];
    float sg = 0.0f, sgx = 0.0f;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
      const float g = dy[row + c] * w[c];
      if constexpr (kLayer) {
        sg += g;
        sgx += g * (x[row + c] - m) * rs;
      } else {
        sgx += g * x[row + c];
      }
    }
    const float2 s = block_sum2(sg, sgx, red);
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
      if constexpr (kLayer) {
        const float xhat = (x[row + c] - m) * rs;
        dx.set(row + c, math::layernorm_dx(dy[row + c], w[c], xhat, rs, s.x * inv_c, s.y * inv_c));
      } else {
        const float xhat = x[row + c] * rs;
        dx.set(row + c, math::rmsnorm_dx(dy[row + c], w[c], xhat, rs, s.y * rs * inv_c));
      }
    }
  }
}

// Block (column tile, chunk): each thread one column, the chunk's rows in order. __fmul_rn /
// __fadd_rn keep nvcc from contracting into FMAs, so the sums round as the CPU's do.
__global__ void norm_weight_partials_kernel(float* partial, AnyConstPtr dy, AnyConstPtr x,
                                            const float* mean, const float* rstd, int64_t N,
                                            int64_t C, int64_t chunk_rows) {
  const int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (c >= C) return;
  const int64_t k = blockIdx.y;
  const int64_t r0 = k * chunk_rows, r1 = r0 + chunk_rows < N ? r0 + chunk_rows : N;
  float pw = 0.0f, pb = 0.0f;
  for (int64_t r = r0; r < r1; ++r) {
    const float d = dy[r * C + c];
    const float xhat =
        mean ? __fmul_rn(x[r * C + c] - mean[r], rstd[r]) : __fmul_rn(x[r * C + c], rstd[r]);
    pw = __fadd_rn(pw, __fmul_rn(d, xhat));
    pb = __fadd_rn(pb, d);
  }
  if (mean) {
    partial[(2 * k) * C + c] = pw;
    partial[(2 * k + 1) * C + c] = pb;
  } else {
    partial[k * C + c] = pw;
  }
}

__global__ void add_chunk_partials_kernel(AnyPtr out, const float* partial, int64_t chunks,
                                          int64_t stride, int64_t C) {
  for (int64_t c = global_thread(); c < C; c += grid_threads()) {
    float acc = 0.0f;
    for (int64_t k = 0; k < chunks; ++k) acc += partial[k * stride + c];
    out.set(c, out[c] + acc);
  }
}

// Threads per row block: enough to cover the row in a few strides, a multiple of 32.
int row_threads(int64_t C) { return C <= 256 ? 64 : C <= 1024 ? 128 : C <= 4096 ? 256 : 512; }
constexpr int kColumnThreads = 256;

}  // namespace

void launch_layernorm_forward(void* stream, void* y, int ty, float* mean, float* rstd,
                              const void* x, int tx, const void* w, int tw, const void* b, int tb,
                              int64_t N, int64_t C, float eps) {
  if (N == 0) return;
  norm_forward_kernel<true><<<row_blocks(N), row_threads(C), 0, as_stream(stream)>>>(
      {y, ty}, mean, rstd, {x, tx}, {w, tw}, {b, tb}, N, C, 1.0f / static_cast<float>(C), eps);
}

void launch_rmsnorm_forward(void* stream, void* y, int ty, float* rstd, const void* x, int tx,
                            const void* w, int tw, int64_t N, int64_t C, float eps) {
  if (N == 0) return;
  norm_forward_kernel<false><<<row_blocks(N), row_threads(C), 0, as_stream(stream)>>>(
      {y, ty}, nullptr, rstd, {x, tx}, {w, tw}, {nullptr, tw}, N, C, 1.0f / static_cast<float>(C),
      eps);
}

void launch_norm_backward_dx(void* stream, void* dx, int tdx, const void* dy, int tdy,
                             const void* x, int tx, const void* w, int tw, const float* mean,
                             const float* rstd, int64_t N, int64_t C) {
  if (N == 0 || C == 0) return;
  const float inv_c = 1.0f / static_cast<float>(C);
  if (mean)
    norm_backward_dx_kernel<true><<<row_blocks(N), row_threads(C), 0, as_stream(stream)>>>(
        {dx, tdx}, {dy, tdy}, {x, tx}, {w, tw}, mean, rstd, N, C, inv_c);
  else
    norm_backward_dx_kernel<false><<<row_blocks(N), row_threads(C), 0, as_stream(stream)>>>(
        {dx, tdx}, {dy, tdy}, {x, tx}, {w, tw}, mean, rstd, N, C, inv_c);
}

void launch_norm_weight_partials(void* stream, float* partial, const void* dy, int tdy,
                                 const void* x, int tx, const float* mean, const float* rstd,
                                 int64_t N, int64_t C, int64_t chunk_rows) {
  if (N == 0 || C == 0) return;
  const int64_t chunks = (N + chunk_rows - 1) / chunk_rows;  // at most 65535 (grid y)
  const dim3 grid(static_cast<unsigned>((C + kColumnThreads - 1) / kColumnThreads),
                  static_cast<unsigned>(chunks));
  norm_weight_partials_kernel<<<grid, kColumnThreads, 0, as_stream(stream)>>>(
      partial, {dy, tdy}, {x, tx}, mean, rstd, N, C, chunk_rows);
}

void launch_add_chunk_partials(void* stream, void* out, int tout, const float* partial,
                               int64_t chunks, int64_t stride, int64_t C) {
  if (C == 0) return;
  add_chunk_partials_kernel<<<grid_for(C, kColumnThreads), kColumnThreads, 0, as_stream(stream)>>>(
      {out, tout}, partial, chunks, stride, C);
}

}  // namespace braid::cuda
