// Launchers of the optimizer update kernels (core/kernels/cuda/optimizer.cu). Pointers are
// device memory, `stream` is a cudaStream_t.
#pragma once

#include <cstdint>

namespace braid::cuda {

// The constants of one AdamW step (core/kernels/optimizer.h's AdamWStep, as plain numbers).
struct AdamWConstants {
  float beta1, beta2, eps, step_size, inv_sqrt_bc2, decay, grad_scale;
};

// w, m, v (n, f32) updated in place from g (n, f32), element by element with
// math::adamw_element: the CPU kernel's bits.
void launch_adamw(void* stream, float* w, float* m, float* v, const float* g, int64_t n,
                  AdamWConstants c);

// The two dynamic maps of 8-bit AdamW (core/kernels/math/dynamic_map.h), passed by value as a
// kernel argument (2 KiB) and copied to shared memory by each block.
struct DynamicMaps {
  float signed_map[256], unsigned_map[256];
};

// 8-bit AdamW over w, g (n, f32) with moments as codes (n, u8) and absmax (ceil(n / 2048), f32)
// (core/kernels/optimizer.h's adamw8bit_update): one CUDA block per quantisation block, the
// per-element arithmetic of core/kernels/math/adamw8bit.h, so the CPU kernel's bits.
void launch_adamw8bit(void* stream, float* w, uint8_t* m_codes, float* m_absmax, uint8_t* v_codes,
                      float* v_absmax, const float* g, int64_t n, AdamWConstants c);

}  // namespace braid::cuda
