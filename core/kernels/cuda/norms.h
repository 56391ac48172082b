// Launchers of the LayerNorm and RMSNorm kernels (core/kernels/cuda/norms.cu). x, y, dy, dx:
// (N, C) row-major; w, b: (C); mean, rstd: (N) f32. Pointers are device memory, dtype codes
// braid::DType values (f32, bf16, f16, each argument its own), `stream` a cudaStream_t.
#pragma once

#include <cstdint>

namespace braid::cuda {

// y = layernorm(x) w + b; mean and rstd of each row saved for the backward.
void launch_layernorm_forward(void* stream, void* y, int ty, float* mean, float* rstd,
                              const void* x, int tx, const void* w, int tw, const void* b, int tb,
                              int64_t N, int64_t C, float eps);
// y = x rstd w; rstd of each row saved.
void launch_rmsnorm_forward(void* stream, void* y, int ty, float* rstd, const void* x, int tx,
                            const void* w, int tw, int64_t N, int64_t C, float eps);

// dx overwritten (dx may be dy). mean null: RMSNorm's gradient, else LayerNorm's.
void launch_norm_backward_dx(void* stream, void* dx, int tdx, const void* dy, int tdy,
                             const void* x, int tx, const void* w, int tw, const float* mean,
                             const float* rstd, int64_t N, int64_t C);

// The weight-gradient partial sums over fixed chunks of `chunk_rows` rows, each summed in row
// order: partial (chunks, parts, C) f32 with part 0 = sum dy xhat and, for LayerNorm (mean not
// null, parts = 2), part 1 = sum dy. xhat = (x - mean) rstd, or x rstd for RMSNorm.
void launch_norm_weight_partials(void* stream, float* partial, const void* dy, int tdy,
                                 const void* x, int tx, const float* mean, const float* rstd,
                                 int64_t N, int64_t C, int64_t chunk_rows);
// out[c] += (sum over k in order of partial[k * stride + c]) for c in [0, C): the CPU's
// add_chunk_partials (core/kernels/cpu/chunked_sum.h), out in any float dtype.
void launch_add_chunk_partials(void* stream, void* out, int tout, const float* partial,
                               int64_t chunks, int64_t stride, int64_t C);

}  // namespace braid::cuda
