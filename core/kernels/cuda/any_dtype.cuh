// f32 loads and stores through a dtype code chosen at run time (f32, bf16, f16), for kernels
// whose arguments may each be stored differently (the CPU kernels accept any mix, widening
// each 16-bit argument). The code is uniform across a launch, so the switch never diverges.
#pragma once

#include "core/kernels/cuda/common.cuh"

namespace braid::cuda {

__device__ __forceinline__ float ld_any(const void* p, int t, int64_t i) {
  switch (t) {
    case kBF16:
      return load_f32(static_cast<const __nv_bfloat16*>(p), i);
    case kF16:
      return load_f32(static_cast<const __half*>(p), i);
    default:
      return static_cast<const float*>(p)[i];
  }
}

// Rounds to nearest even when narrowing.
__device__ __forceinline__ void st_any(void* p, int t, int64_t i, float v) {
  switch (t) {
    case kBF16:
      store_f32(static_cast<__nv_bfloat16*>(p), i, v);
      break;
    case kF16:
      store_f32(static_cast<__half*>(p), i, v);
      break;
    default:
      static_cast<float*>(p)[i] = v;
      break;
  }
}

// A device pointer with its dtype code.
struct AnyPtr {
  void* p;
  int t;
  __device__ __forceinline__ float operator[](int64_t i) const { return ld_any(p, t, i); }
  __device__ __forceinline__ void set(int64_t i, float v) const { st_any(p, t, i, v); }
};
struct AnyConstPtr {
  const void* p;
  int t;
  __device__ __forceinline__ float operator[](int64_t i) const { return ld_any(p, t, i); }
};

// Grid-stride loop bounds over n elements.
__device__ __forceinline__ int64_t global_thread() {
  return blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
}
__device__ __forceinline__ int64_t grid_threads() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

}  // namespace braid::cuda
