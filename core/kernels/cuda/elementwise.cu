// Elementwise glue kernels: residual add, y = alpha*y + beta*x, casts, and the sum of squares
// behind gradient norms. Buffers: contiguous, n elements, any of f32/bf16/f16 per argument
// (the dtype is uniform across a launch, so the switch in ld_any/st_any does not diverge); f32
// arithmetic, results rounded to nearest even on store.
#include "core/kernels/cuda/any_dtype.cuh"
#include "core/kernels/cuda/elementwise.h"

namespace braid::cuda {

namespace {

__global__ void add_kernel(void* y, int ty, const void* a, int ta, const void* b, int tb,
                           int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    st_any(y, ty, i, ld_any(a, ta, i) + ld_any(b, tb, i));
}

// beta == 0 never reads x (scale_inplace passes y itself).
__global__ void axpby_kernel(void* y, int ty, float alpha, const void* x, int tx, float beta,
                             int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float yv = ld_any(y, ty, i);
    st_any(y, ty, i,
           beta == 0.0f ? yv * alpha : (alpha == 1.0f ? yv : yv * alpha) + ld_any(x, tx, i) * beta);
  }
}

__global__ void cast_kernel(void* dst, int td, const void* src, int ts, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    st_any(dst, td, i, ld_any(src, ts, i));
}

// One block per chunk: a fixed reduction tree per chunk, so the result depends on n and chunk
// only, not on the grid.
__global__ void sum_squares_kernel(double* partial, const void* x, int tx, int64_t n,
                                   int64_t chunk) {
  __shared__ double warp_sums[32];
  const int64_t begin = blockIdx.x * chunk;
  const int64_t end = begin + chunk < n ? begin + chunk : n;
  double acc = 0.0;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const double v = ld_any(x, tx, i);
    acc += v * v;
  }
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) warp_sums[warp] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    double s = 0.0;
    for (int w = 0; w < static_cast<int>(blockDim.x >> 5); ++w) s += warp_sums[w];
    partial[blockIdx.x] = s;
  }
}

__global__ void sum_partials_kernel(double* out, const double* partial, int64_t blocks) {
  if (threadIdx.x == 0 && blockIdx.x == 0) {
    double s = 0.0;
    for (int64_t b = 0; b < blocks; ++b) s += partial[b];
    out[0] = s;
  }
}

}  // namespace

void launch_add(void* stream, void* y, int ty, const void* a, int ta, const void* b, int tb,
                int64_t n) {
  if (n == 0) return;
  add_kernel<<<grid_for(n, kThreads), kThreads, 0, as_stream(stream)>>>(y, ty, a, ta, b, tb, n);
}

void launch_axpby(void* stream, void* y, int ty, float alpha, const void* x, int tx, float beta,
                  int64_t n) {
  if (n == 0) return;
  axpby_kernel<<<grid_for(n, kThreads), kThreads, 0, as_stream(stream)>>>(y, ty, alpha, x, tx,
                                                                          beta, n);
}

void launch_cast(void* stream, void* dst, int tdst, const void* src, int tsrc, int64_t n) {
  if (n == 0) return;
  cast_kernel<<<grid_for(n, kThreads), kThreads, 0, as_stream(stream)>>>(dst, tdst, src, tsrc, n);
}

int64_t launch_sum_squares_partials(void* stream, double* partial, const void* x, int tx,
                                    int64_t n, int64_t chunk) {
  const int64_t blocks = (n + chunk - 1) / chunk;
  if (blocks == 0) return 0;
  sum_squares_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, as_stream(stream)>>>(
      partial, x, tx, n, chunk);
  return blocks;
}

void launch_sum_partials(void* stream, double* out, const double* partial, int64_t blocks) {
  sum_partials_kernel<<<1, 32, 0, as_stream(stream)>>>(out, partial, blocks);
}

}  // namespace braid::cuda
