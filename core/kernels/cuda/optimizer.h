// Launchers of the optimizer update kernels (core/kernels/cuda/optimizer.cu). Pointers are
// device memory, `stream` is a cudaStream_t.
#pragma once

#include <cstdint>

namespace braid::cuda {

// The constants of one AdamW step (core/kernels/optimizer.h's AdamWStep, as plain numbers).
struct AdamWConstants {
  float beta1, beta2, eps, step_size, inv_sqrt_bc2, decay;
};

// w, m, v (n, f32) updated in place from g (n, f32), element by element with
// math::adamw_element: the CPU kernel's bits.
void launch_adamw(void* stream, float* w, float* m, float* v, const float* g, int64_t n,
                  AdamWConstants c);

}  // namespace braid::cuda
