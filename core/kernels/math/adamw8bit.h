// Per-element arithmetic of 8-bit AdamW (Dettmers et al. 2022, bitsandbytes' blockwise 8-bit
// Adam), shared by the CPU kernel and the CUDA kernel (core/kernels/cpu/optimizer.cpp,
// core/kernels/cuda/optimizer.cu). The moments are stored as one byte per element plus one f32
// absmax per block of kAdam8bitBlock elements: m with the signed dynamic map, v (never
// negative) with the unsigned one (core/kernels/math/dynamic_map.h). A step dequantises a
// block, runs the f32 AdamW update on it (adamw.h), updates the weights from the f32 moments,
// then requantises the moments against the block's new absmax (nearest code, quantize.h); the
// weights see the unrounded moments, as in bitsandbytes.
// The maps are passed as pointers: the CUDA kernel keeps them in shared memory.
#pragma once

#include <cstdint>

#include "core/kernels/math/adamw.h"
#include "core/kernels/math/hd.h"
#include "core/kernels/math/quantize.h"

namespace braid::math {

// Elements per quantisation block of the 8-bit moments (bitsandbytes' blockwise optimizers).
constexpr int64_t kAdam8bitBlock = 2048;

// The stored value of code q of a block with this absmax.
BRAID_HD float dynamic_value(const float* map, uint8_t q, float absmax) { return map[q] * absmax; }

// The code of x in a block whose new absmax is `absmax` (0 for an all-zero block: every value
// then encodes as the map's zero, because block_scale clamps the divisor).
BRAID_HD uint8_t dynamic_encode(const float* map, float x, float absmax) {
  return static_cast<uint8_t>(nearest_code(map, 256, clamp_unit(x * block_scale(absmax))));
}

}  // namespace braid::math
