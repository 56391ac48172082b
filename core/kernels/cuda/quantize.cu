// Block-wise quantisation and dequantisation (NF4, int8, the 8-bit dynamic maps).
// Buffers: x / y contiguous, f32, bf16 or f16; q u8 (NF4: two codes a byte, the even element in
// the high nibble); absmax f32, one per block. The per-element arithmetic is the CPU kernels'
// (core/kernels/math/quantize.h), so codes, absmax values and read-back values are the same bits.
#include "core/kernels/cuda/any_dtype.cuh"
#include "core/kernels/cuda/quantize.h"
#include "core/kernels/math/quantize.h"

namespace braid::cuda {

namespace {

constexpr int kNf4 = 0, kInt8 = 1;  // QuantCode::Nf4, QuantCode::Int8

__device__ int encode(const QuantTable& t, float s) {
  if (t.kind == kNf4) return math::nf4_encode(s);
  if (t.kind == kInt8) return math::int8_encode(s);
  return math::nearest_code(t.v, t.n, s);
}

// One CUDA block per quantisation block [i0, i1).
__global__ void quantize_kernel(uint8_t* q, float* absmax, AnyConstPtr x, int64_t n,
                                int64_t block, QuantTable table) {
  __shared__ float part[kThreads];
  const int64_t b = blockIdx.x, i0 = b * block, i1 = min(n, i0 + block);
  float m = 0.0f;
  for (int64_t i = i0 + threadIdx.x; i < i1; i += blockDim.x) m = fmaxf(m, fabsf(x[i]));
  part[threadIdx.x] = m;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {  // max is exact in any order
    if (threadIdx.x < s) part[threadIdx.x] = fmaxf(part[threadIdx.x], part[threadIdx.x + s]);
    __syncthreads();
  }
  m = part[0];
  if (threadIdx.x == 0) absmax[b] = m;
  // bitsandbytes multiplies whole blocks by the reciprocal and divides the last partial one.
  const bool partial = i1 - i0 < block;
  const float am = fmaxf(m, 1e-38f), recip = math::block_scale(m);
  auto code_at = [&](int64_t i) {
    const float v = x[i];
    return encode(table, math::clamp_unit(partial ? v / am : v * recip));
  };
  if (table.kind != kNf4) {
    for (int64_t i = i0 + threadIdx.x; i < i1; i += blockDim.x)
      q[i] = static_cast<uint8_t>(code_at(i));
    return;
  }
  // Pairs (2p, 2p + 1); an odd n pads the last low nibble with the code of 0 (7).
  for (int64_t i = i0 + 2 * threadIdx.x; i < i1; i += 2 * blockDim.x) {
    const int hi = code_at(i), lo = i + 1 < i1 ? code_at(i + 1) : 7;
    q[i >> 1] = static_cast<uint8_t>((hi << 4) | lo);
  }
}

__global__ void dequantize_kernel(AnyPtr y, const uint8_t* q, const float* absmax, int64_t begin,
                                  int64_t n, int64_t block, QuantTable table, float offset) {
  for (int64_t j = global_thread(); j < n; j += grid_threads()) {
    const int64_t i = begin + j;
    const int k = table.kind == kNf4 ? math::nf4_code_at(q, i) : q[i];
    const float v = __fmul_rn(table.v[k], absmax[i / block]);
    y.set(j, offset != 0.0f ? __fadd_rn(v, offset) : v);
  }
}

}  // namespace

void launch_quantize_blockwise(void* stream, uint8_t* q, float* absmax, const void* x, int tx,
                               int64_t n, int64_t block, const QuantTable& table) {
  const int64_t blocks = (n + block - 1) / block;
  if (blocks == 0) return;
  // Threads per quantisation block: the power of two that covers it, from one warp up to
  // kThreads (QLoRA's 64-value blocks would leave most of 256 threads idle at every barrier).
  int threads = 32;
  while (threads < kThreads && threads < block) threads *= 2;
  quantize_kernel<<<static_cast<unsigned>(blocks), threads, 0, as_stream(stream)>>>(
      q, absmax, {x, tx}, n, block, table);
}

void launch_dequantize_blockwise(void* stream, void* y, int ty, const uint8_t* q,
                                 const float* absmax, int64_t begin, int64_t n, int64_t block,
                                 const QuantTable& table, float offset) {
  if (n == 0) return;
  dequantize_kernel<<<grid_for(n, kThreads), kThreads, 0, as_stream(stream)>>>(
      {y, ty}, q, absmax, begin, n, block, table, offset);
}

}  // namespace braid::cuda
