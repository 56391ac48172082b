// Launchers of the linear layer's helper kernels (core/kernels/cuda/linear.cu); the products
// themselves are cuBLASLt GEMMs (core/kernels/cuda/blas.h). Pointers are device memory, dtype
// codes are braid::DType values (f32, bf16, f16), `stream` is a cudaStream_t.
#pragma once

#include <cstdint>

namespace braid::cuda {

// y (rows, cols) <- b (cols) in every row, converted to y's dtype.
void launch_broadcast_rows(void* stream, void* y, int ty, const void* b, int tb, int64_t rows,
                           int64_t cols);
// p (n) <- value, in dtype t.
void launch_fill(void* stream, void* p, int t, float value, int64_t n);

}  // namespace braid::cuda
