// Dropout with counter-based masks: element i is dropped when the hash of (seed, stream, its
// index in the whole tensor) maps below p, the same draw as the CPU kernel
// (core/kernels/math/dropout.h, core/kernels/math/counter_rng.h), so both backends drop the
// same elements and scale the kept ones by the same float.
//
// Buffers: x, y n elements, f32/bf16/f16 each (f32 arithmetic, rounded on store); y may be x.
#include "core/kernels/cuda/any_dtype.cuh"
#include "core/kernels/cuda/dropout.h"
#include "core/kernels/math/dropout.h"

namespace braid::cuda {

namespace {

__global__ void dropout_kernel(AnyPtr y, AnyConstPtr x, int64_t n, float p, float keep_scale,
                               uint64_t base, int64_t cols, int64_t full_cols, int64_t col_offset) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    const int64_t idx = math::dropout_index(i, cols, full_cols, col_offset);
    y.set(i, math::dropout_value(x[i], base, idx, p, keep_scale));
  }
}

}  // namespace

void launch_dropout(void* stream, void* y, int ty, const void* x, int tx, int64_t n, float p,
                    float keep_scale, uint64_t base, int64_t cols, int64_t full_cols,
                    int64_t col_offset) {
  if (n == 0) return;
  dropout_kernel<<<grid_for(n, kThreads), kThreads, 0, as_stream(stream)>>>(
      {y, ty}, {x, tx}, n, p, keep_scale, base, cols, full_cols, col_offset);
}

}  // namespace braid::cuda
