// Launchers of the block-wise quantisation kernels (core/kernels/cuda/quantize.cu). Pointers
// are device memory, `stream` is a cudaStream_t, dtype codes are common.cuh's (f32, bf16, f16).
#pragma once

#include <cstdint>

namespace braid::cuda {

// A code table (NF4: 16 values, int8 and the dynamic maps: 256), passed by value to the kernels;
// `kind` is QuantCode's value (core/kernels/quantize.h).
struct QuantTable {
  float v[256];
  int n;
  int kind;
};

// q, absmax = block-wise quantisation of x (n values of dtype tx): one CUDA block per
// quantisation block, absmax the block's max |x|, each value the nearest code of x / absmax
// (core/kernels/math/quantize.h: the CPU kernel's bits). NF4 packs two codes a byte.
void launch_quantize_blockwise(void* stream, uint8_t* q, float* absmax, const void* x, int tx,
                               int64_t n, int64_t block, const QuantTable& table);
// y (n values of dtype ty) = table[code of value begin + j] * absmax[(begin + j) / block],
// plus offset when it is not 0 (each rounded once, as the CPU).
void launch_dequantize_blockwise(void* stream, void* y, int ty, const uint8_t* q,
                                 const float* absmax, int64_t begin, int64_t n, int64_t block,
                                 const QuantTable& table, float offset);

}  // namespace braid::cuda
