// Optimizer update kernels. AdamW: w, m, v, g are contiguous f32 of n elements (the master
// weights or f32 weights, the two moments and the gradient); one thread per element in a
// grid-stride loop, the arithmetic of core/kernels/math/adamw.h.
// 8-bit AdamW: w, g contiguous f32 of n elements, the moments' codes u8 of n elements and their
// absmax f32 of ceil(n / 2048); one CUDA block of kThreads threads per quantisation block, each
// thread holding kAdam8bitBlock / kThreads elements in registers between the update and the
// requantisation (core/kernels/math/adamw8bit.h).
#include "core/kernels/cuda/common.cuh"
#include "core/kernels/cuda/optimizer.h"
#include "core/kernels/math/adamw.h"
#include "core/kernels/math/adamw8bit.h"
#include "core/kernels/math/dynamic_map.h"

namespace braid::cuda {

namespace {

__global__ void adamw_kernel(float* __restrict__ w, float* __restrict__ m, float* __restrict__ v,
                             const float* __restrict__ g, int64_t n, AdamWConstants c) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float wi = w[i], mi = m[i], vi = v[i];
    math::adamw_element(wi, mi, vi, g[i], c.beta1, c.beta2, c.eps, c.step_size, c.inv_sqrt_bc2,
                        c.decay, c.grad_scale);
    w[i] = wi;
    m[i] = mi;
    v[i] = vi;
  }
}

constexpr int kPerThread = static_cast<int>(math::kAdam8bitBlock) / kThreads;

__global__ void adamw8bit_kernel(float* __restrict__ w, uint8_t* __restrict__ mq,
                                 float* __restrict__ ma, uint8_t* __restrict__ vq,
                                 float* __restrict__ va, const float* __restrict__ g, int64_t n,
                                 AdamWConstants c, DynamicMaps maps) {
  __shared__ float smap[256], umap[256], red[32];
  smap[threadIdx.x] = maps.signed_map[threadIdx.x];
  umap[threadIdx.x] = maps.unsigned_map[threadIdx.x];
  __syncthreads();
  const int64_t b = blockIdx.x, lo = b * math::kAdam8bitBlock;
  const float m_abs = ma[b], v_abs = va[b];
  float m[kPerThread], v[kPerThread];
  float m_max = 0.0f, v_max = 0.0f;
  for (int k = 0; k < kPerThread; ++k) {
    const int64_t i = lo + threadIdx.x + static_cast<int64_t>(k) * kThreads;
    m[k] = 0.0f;
    v[k] = 0.0f;
    if (i >= n) continue;
    m[k] = math::dynamic_value(smap, mq[i], m_abs);
    v[k] = math::dynamic_value(umap, vq[i], v_abs);
    float wi = w[i];
    math::adamw_element(wi, m[k], v[k], g[i], c.beta1, c.beta2, c.eps, c.step_size,
                        c.inv_sqrt_bc2, c.decay, c.grad_scale);
    w[i] = wi;
    m_max = fmaxf(m_max, fabsf(m[k]));
    v_max = fmaxf(v_max, v[k]);
  }
  m_max = block_max(m_max, red);
  v_max = block_max(v_max, red);
  for (int k = 0; k < kPerThread; ++k) {
    const int64_t i = lo + threadIdx.x + static_cast<int64_t>(k) * kThreads;
    if (i >= n) continue;
    mq[i] = math::dynamic_encode(smap, m[k], m_max);
    vq[i] = math::dynamic_encode(umap, v[k], v_max);
  }
  if (threadIdx.x == 0) {
    ma[b] = m_max;
    va[b] = v_max;
  }
}

}  // namespace

void launch_adamw(void* stream, float* w, float* m, float* v, const float* g, int64_t n,
                  AdamWConstants c) {
  if (n == 0) return;
  adamw_kernel<<<grid_for(n, kThreads), kThreads, 0, as_stream(stream)>>>(w, m, v, g, n, c);
}

void launch_adamw8bit(void* stream, float* w, uint8_t* m_codes, float* m_absmax, uint8_t* v_codes,
                      float* v_absmax, const float* g, int64_t n, AdamWConstants c) {
  if (n == 0) return;
  static_assert(math::kAdam8bitBlock % kThreads == 0 && kThreads == 256);
  DynamicMaps maps;
  for (int i = 0; i < 256; ++i) {
    maps.signed_map[i] = math::kDynamicSigned[i];
    maps.unsigned_map[i] = math::kDynamicUnsigned[i];
  }
  const int64_t blocks = (n + math::kAdam8bitBlock - 1) / math::kAdam8bitBlock;
  adamw8bit_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, as_stream(stream)>>>(
      w, m_codes, m_absmax, v_codes, v_absmax, g, n, c, maps);
}

}  // namespace braid::cuda
