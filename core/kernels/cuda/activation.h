// Launchers of the activation kernels (core/kernels/cuda/activation.cu). Pointers are device
// memory of n elements, dtype codes are braid::DType values (f32, bf16, f16), `stream` is a
// cudaStream_t. Arithmetic in f32 (core/kernels/math/activation.h).
#pragma once

#include <cstdint>

namespace braid::cuda {

// y = gelu(x); y may be x.
void launch_gelu_forward(void* stream, void* y, int ty, const void* x, int tx, int64_t n);
// dx = dy * gelu'(x); dx may be dy.
void launch_gelu_backward(void* stream, void* dx, int tdx, const void* dy, int tdy, const void* x,
                          int tx, int64_t n);
// y = gelu(x) and d = gelu'(x); d may be x, y may not.
void launch_gelu_with_derivative(void* stream, void* y, int ty, void* d, int td, const void* x,
                                 int tx, int64_t n);
// dx = dy * d; dx may be dy or d.
void launch_mul(void* stream, void* dx, int tdx, const void* dy, int tdy, const void* d, int td,
                int64_t n);
// y = silu(gate) * up.
void launch_swiglu_forward(void* stream, void* y, int ty, const void* gate, int tg, const void* up,
                           int tu, int64_t n);
// dgate, dup from dy (dgate and dup distinct).
void launch_swiglu_backward(void* stream, void* dgate, int tdg, void* dup, int tdu, const void* dy,
                            int tdy, const void* gate, int tg, const void* up, int tu, int64_t n);

}  // namespace braid::cuda
