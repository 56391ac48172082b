// What every .cu file of the CUDA backend shares: storage types by braid dtype code, f32 loads
// and stores of them, grid sizes, and the launch check. nvcc only; no braid C++ headers (the
// tensor-level wrappers in the .cpp files pass pointers, sizes, dtype codes and the stream).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace braid::cuda {

// Storage dtype codes as the launchers take them: the values of braid::DType (core/dtype.h).
enum DtypeCode : int { kF32 = 0, kBF16 = 1, kF16 = 2, kI32 = 3 };

__device__ __forceinline__ float load_f32(const float* p, int64_t i) { return p[i]; }
__device__ __forceinline__ float load_f32(const __nv_bfloat16* p, int64_t i) {
  return __bfloat162float(p[i]);
}
__device__ __forceinline__ float load_f32(const __half* p, int64_t i) { return __half2float(p[i]); }

// Round to nearest even when narrowing (the CPU's float_to_bf16 / float_to_f16).
__device__ __forceinline__ void store_f32(float* p, int64_t i, float v) { p[i] = v; }
__device__ __forceinline__ void store_f32(__nv_bfloat16* p, int64_t i, float v) {
  p[i] = __float2bfloat16_rn(v);
}
__device__ __forceinline__ void store_f32(__half* p, int64_t i, float v) {
  p[i] = __float2half_rn(v);
}

inline cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

// Threads per block of the element-wise kernels (a multiple of the warp size).
constexpr int kThreads = 256;

// One block per row, for the kernels that give each row a block: at least one block, at most
// kMaxRowBlocks (the kernels loop over the rows beyond).
constexpr int64_t kMaxRowBlocks = int64_t{1} << 20;
inline unsigned row_blocks(int64_t rows) {
  return static_cast<unsigned>(rows < 1 ? 1 : rows < kMaxRowBlocks ? rows : kMaxRowBlocks);
}

// Blocks of `threads` covering n elements, capped so a grid-stride loop does the rest.
inline unsigned grid_for(int64_t n, int threads, int64_t max_blocks = 65535L * 16) {
  int64_t b = (n + threads - 1) / threads;
  if (b < 1) b = 1;
  if (b > max_blocks) b = max_blocks;
  return static_cast<unsigned>(b);
}

// Calls f.template operator()<T>() with T the storage type of `code` (f32, bf16, f16).
template <typename F>
void with_float_type(int code, F&& f) {
  switch (code) {
    case kBF16: f.template operator()<__nv_bfloat16>(); break;
    case kF16: f.template operator()<__half>(); break;
    default: f.template operator()<float>(); break;
  }
}

// Warp and block sums (f32); `shared` holds one float per warp (at most 32).
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
// Every thread of the block gets the sum. blockDim.x a multiple of 32, at most 1024.
__device__ __forceinline__ float block_sum(float v, float* shared) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_sum(v);
  __syncthreads();  // shared may still be read by a previous call
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  const int warps = (blockDim.x + 31) >> 5;
  v = lane < warps ? shared[lane] : 0.0f;
  return warp_sum(v);
}
__device__ __forceinline__ float block_max(float v, float* shared) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  const int warps = (blockDim.x + 31) >> 5;
  v = lane < warps ? shared[lane] : -INFINITY;
  return warp_max(v);
}

}  // namespace braid::cuda
