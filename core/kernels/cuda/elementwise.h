// Launchers of the elementwise glue kernels (core/kernels/cuda/elementwise.cu). Pointers are
// device memory, dtype codes are braid::DType values (f32, bf16, f16), `stream` is a
// cudaStream_t. Arithmetic in f32.
#pragma once

#include <cstdint>

namespace braid::cuda {

// y = a + b over n elements (y may alias a or b).
void launch_add(void* stream, void* y, int ty, const void* a, int ta, const void* b, int tb,
                int64_t n);
// y = y * alpha + x * beta over n elements (add_inplace: 1, 1; scale_inplace: s, 0 with x = y).
void launch_axpby(void* stream, void* y, int ty, float alpha, const void* x, int tx, float beta,
                  int64_t n);
// dst = src converted (round to nearest even).
void launch_cast(void* stream, void* dst, int tdst, const void* src, int tsrc, int64_t n);
// partial[b] = sum of x^2 over block b's fixed range of `chunk` elements, in double;
// returns the number of blocks (partial must hold ceil(n / chunk)). Then
// launch_sum_partials adds them in order into out[0]: the same result for the same n.
int64_t launch_sum_squares_partials(void* stream, double* partial, const void* x, int tx, int64_t n,
                                    int64_t chunk);
void launch_sum_partials(void* stream, double* out, const double* partial, int64_t blocks);

}  // namespace braid::cuda
