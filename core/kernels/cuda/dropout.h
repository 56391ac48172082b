// Launcher of the dropout kernel (core/kernels/cuda/dropout.cu). x, y: n elements of device
// memory, dtype codes f32/bf16/f16; `stream` a cudaStream_t.
#pragma once

#include <cstdint>

namespace braid::cuda {

// y = x * mask / (1 - p) with the CPU's counter-based mask (core/kernels/math/dropout.h):
// element i draws index math::dropout_index(i, cols, full_cols, col_offset) under
// base = hash_combine(seed, stream). y may be x.
void launch_dropout(void* stream, void* y, int ty, const void* x, int tx, int64_t n, float p,
                    float keep_scale, uint64_t base, int64_t cols, int64_t full_cols,
                    int64_t col_offset);

}  // namespace braid::cuda
