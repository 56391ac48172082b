// Optimizer update kernels. AdamW: w, m, v, g are contiguous f32 of n elements (the master
// weights or f32 weights, the two moments and the gradient); one thread per element in a
// grid-stride loop, the arithmetic of core/kernels/math/adamw.h.
#include "core/kernels/cuda/common.cuh"
#include "core/kernels/cuda/optimizer.h"
#include "core/kernels/math/adamw.h"

namespace braid::cuda {

namespace {

__global__ void adamw_kernel(float* __restrict__ w, float* __restrict__ m, float* __restrict__ v,
                             const float* __restrict__ g, int64_t n, AdamWConstants c) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float wi = w[i], mi = m[i], vi = v[i];
    math::adamw_element(wi, mi, vi, g[i], c.beta1, c.beta2, c.eps, c.step_size, c.inv_sqrt_bc2,
                        c.decay);
    w[i] = wi;
    m[i] = mi;
    v[i] = vi;
  }
}

constexpr int kThreads = 256;

}  // namespace

void launch_adamw(void* stream, float* w, float* m, float* v, const float* g, int64_t n,
                  AdamWConstants c) {
  if (n == 0) return;
  adamw_kernel<<<grid_for(n, kThreads), kThreads, 0, as_stream(stream)>>>(w, m, v, g, n, c);
}

}  // namespace braid::cuda
