// Helper kernels of the CUDA linear layer: the bias written into every output row before the
// GEMM adds x W^T onto it (so the sum is rounded once, as on the CPU), and a constant fill
// (the ones vector whose product with dy gives the bias gradient). Buffers are contiguous;
// dtypes are uniform across a launch, so the switches below do not diverge.
#include "core/kernels/cuda/any_dtype.cuh"
#include "core/kernels/cuda/linear.h"

namespace braid::cuda {

namespace {

// y: (rows, cols); b: (cols).
__global__ void broadcast_rows_kernel(void* y, int ty, const void* b, int tb, int64_t rows,
                                      int64_t cols) {
  const int64_t n = rows * cols;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    st_any(y, ty, i, ld_any(b, tb, i % cols));
}

__global__ void fill_kernel(void* p, int t, float value, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    st_any(p, t, i, value);
}

}  // namespace

void launch_broadcast_rows(void* stream, void* y, int ty, const void* b, int tb, int64_t rows,
                           int64_t cols) {
  const int64_t n = rows * cols;
  if (n == 0) return;
  broadcast_rows_kernel<<<grid_for(n, kThreads), kThreads, 0, as_stream(stream)>>>(y, ty, b, tb,
                                                                                   rows, cols);
}

void launch_fill(void* stream, void* p, int t, float value, int64_t n) {
  if (n == 0) return;
  fill_kernel<<<grid_for(n, kThreads), kThreads, 0, as_stream(stream)>>>(p, t, value, n);
}

}  // namespace braid::cuda
