// Blocked transposes for the CPU kernels' packing steps (attention's key/value and gradient
// layouts): 16 x 16 blocks in AVX-512 registers where the level allows, plain loops elsewhere
// and for the edges. Pure data movement, except transpose_f32_to_bf16's rounding, which is
// narrow_from_f32's on the same path (the same bits as narrowing each output row).
#pragma once

#include <cstdint>

#include "core/context.h"
#include "core/kernels/cpu/convert.h"

namespace braid::cpu {

// dst[c * ldd + r] = src[r * lds + c] for r < rows, c < cols (32-bit elements).
void transpose_u32(CpuIsa isa, uint32_t* dst, int64_t ldd, const uint32_t* src, int64_t lds,
                   int64_t rows, int64_t cols);
// The same for 16-bit elements.
void transpose_u16(CpuIsa isa, uint16_t* dst, int64_t ldd, const uint16_t* src, int64_t lds,
                   int64_t rows, int64_t cols);
// dst[c * ldd + r] = bf16(src[r * lds + c]) rounded on `path`: dst row c is what
// narrow_from_f32(path, BF16, column c of src, dst row c, rows) writes.
void transpose_f32_to_bf16(ConvertIsa path, CpuIsa isa, uint16_t* dst, int64_t ldd,
                           const float* src, int64_t lds, int64_t rows, int64_t cols);

}  // namespace braid::cpu
