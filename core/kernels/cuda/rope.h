// Launchers of the rotary position embedding kernels (core/kernels/cuda/rope.cu). x: (B, T, H, D)
// row-major device memory of dtype code tx (f32, bf16, f16), rotated in place; `stream` a
// cudaStream_t.
#pragma once

#include <cstdint>

namespace braid::cuda {

// table (T, 2, D/2) f32: per position p = pos_offset + t, scale * cos then sign * scale * sin of
// the angle p * freq[i] of each pair (freq: D/2 doubles in device memory; computed in double,
// rounded once).
void launch_rope_table(void* stream, float* table, const double* freq, int64_t T, int64_t D,
                       int64_t pos_offset, double scale, float sign);
// Rotates every (i, i + D/2) pair of x by the table's angle of its position t.
void launch_rope_rotate(void* stream, void* x, int tx, const float* table, int64_t B, int64_t T,
                        int64_t H, int64_t D);

}  // namespace braid::cuda
