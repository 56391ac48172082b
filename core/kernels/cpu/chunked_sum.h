// Deterministic column sums over rows: fixed row chunks whose partials are added in chunk
// order, so parameter gradients do not depend on the thread count.
#pragma once

#include <algorithm>
#include <cstdint>

namespace braid::cpu {

// Rows per chunk for n rows; depends only on n (never on the thread count). At most 256 chunks
// keeps the partial buffer small next to the (n, C) inputs.
inline int64_t rows_per_chunk(int64_t n) {
  constexpr int64_t kMaxChunks = 256, kMinRows = 16;
  return std::max(kMinRows, (n + kMaxChunks - 1) / kMaxChunks);
}

// out[c] += sum over k in order of partial[k * stride + c], for c in [0, C).
// partial: (chunks, stride) with stride >= C. Parallel over column blocks.
inline void add_chunk_partials(float* out, const float* partial, int64_t chunks, int64_t stride,
                               int64_t C) {
  constexpr int64_t kBlock = 32;  // columns per task: whole cache lines, yet many tasks
  const int64_t blocks = (C + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static)
  for (int64_t j = 0; j < blocks; ++j) {
    const int64_t c0 = j * kBlock, c1 = std::min(C, c0 + kBlock);
    float acc[kBlock] = {};
    for (int64_t k = 0; k < chunks; ++k) {
      const float* p = partial + k * stride;
#pragma omp simd
      for (int64_t c = c0; c < c1; ++c) acc[c - c0] += p[c];
    }
#pragma omp simd
    for (int64_t c = c0; c < c1; ++c) out[c] += acc[c - c0];
  }
}

}  // namespace braid::cpu
